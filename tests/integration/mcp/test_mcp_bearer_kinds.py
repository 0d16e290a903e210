"""Which bearer is which: application tokens as identity providers shape them, 401 everywhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar import Litestar

from handlers import HANDLERS
from runtime.mcp.app import attach_services
from runtime.security import TokenTrust
from runtime.security.devtools import DEV_AUDIENCE, DEV_ISSUER, DevIdentity
from runtime.settings import Settings
from tests.support.mcp import LEGACY, MODERN, McpTestClient, asgi_client
from tests.support.tokens import auth_headers

APP_ISSUER = "https://clients.example.com"
APP_AUDIENCE = "workflow-mcp-clients"
HOST = "7d1a6c2e-3b4f-4e8a-9c1d-2f5e6a7b8c9d"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """User and application tokens come from separate issuers for separate audiences."""
    settings.security.app_token = TokenTrust(issuers=[APP_ISSUER], audiences=[APP_AUDIENCE])
    return settings


def _app(identity: DevIdentity, **overrides: Any) -> str:
    return identity.app_token(issuer=APP_ISSUER, audience=APP_AUDIENCE, **overrides)


def _idp_client_credentials(identity: DevIdentity) -> str:
    """An identity-provider-shaped client-credentials token: its sub is not its client id."""
    claims = {
        "iss": DEV_ISSUER,
        "aud": DEV_AUDIENCE,
        "sub": "svc-reporting@clients",
        "client_id": "svc-reporting",
        "gty": "client-credentials",
        "host": HOST,
        "roles": ["admin", "workflow-admin"],
        "exp": 4_102_444_800,
    }
    return identity.sign(claims)


def _start(client: McpTestClient, headers: dict[str, str]) -> Any:
    args = {"wfDefId": "00000000-0000-4000-8000-000000000001", "input": {}}
    return client.request(
        "tools/call", {"name": "workflow_start", "arguments": args}, headers=headers
    )


@pytest.mark.requirement("000:Operator setup")
async def test_an_idp_client_credentials_token_whose_sub_is_not_its_client_id_is_refused_as_a_user(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    client = McpTestClient(http, MODERN, {})
    idp_token = _idp_client_credentials(dev_identity)
    reply = await _start(client, auth_headers(dev_identity, idp_token, _app(dev_identity)))
    assert reply.status == 401 and "www-authenticate" in reply.headers
    assert "application token" in reply.error["message"]
    # The same kind of token marked only by its RFC 9068 typ header is refused as a user too.
    at_jwt = dev_identity.sign(
        {"iss": DEV_ISSUER, "aud": DEV_AUDIENCE, "sub": "u-1", "host": HOST, "exp": 4_102_444_800},
        headers={"typ": "at+jwt"},
    )
    reply = await _start(client, auth_headers(dev_identity, at_jwt, _app(dev_identity)))
    assert reply.status == 401


@pytest.mark.requirement("000:Request host and identity")
async def test_user_and_app_tokens_are_checked_against_their_own_issuer_and_audience(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    client = McpTestClient(http, MODERN, {})
    user = dev_identity.user_token(host_id=HOST, roles=("workflow-admin",))
    accepted = await _start(client, auth_headers(dev_identity, user, _app(dev_identity)))
    assert accepted.status == 200
    assert accepted.result["structuredContent"]["error"]["code"] == "WORKFLOW_NOT_FOUND"
    # An application token from the user issuer, and a user token from the client issuer.
    wrong_app = await _start(client, auth_headers(dev_identity, user, dev_identity.app_token()))
    user_from_app_issuer = dev_identity.user_token(
        host_id=HOST, issuer=APP_ISSUER, audience=APP_AUDIENCE
    )
    wrong_user = await _start(
        client, auth_headers(dev_identity, user_from_app_issuer, _app(dev_identity))
    )
    assert wrong_app.status == 401 and wrong_user.status == 401


@pytest.mark.requirement("000:Request host and identity")
@pytest.mark.parametrize("era", [MODERN, LEGACY])
@pytest.mark.parametrize("method", ["initialize", "ping", "tools/list"])
async def test_a_bearer_that_is_present_but_invalid_is_401_with_a_challenge_on_every_method(
    http: httpx.AsyncClient, dev_identity: DevIdentity, era: str, method: str
) -> None:
    client = McpTestClient(http, era, {})
    params = _params(method, era)
    for headers in (
        {"Authorization": f"Bearer {dev_identity.user_token(expired=True)}"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {
            "Authorization": f"Bearer {dev_identity.user_token()}",
            "X-Scope-Token": f"Bearer {dev_identity.user_token()}",
        },
    ):
        reply = await client.request(method, params, headers=headers)
        assert reply.status == 401, (method, reply.body)
        assert reply.headers["www-authenticate"].startswith("Bearer ")
        assert dev_identity.user_token() not in str(reply.body)


@pytest.mark.requirement("000:Request host and identity")
async def test_tools_list_needs_a_bearer_unless_anonymous_discovery_is_on(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    anonymous = McpTestClient(http, MODERN, {})
    assert (await anonymous.request("tools/list")).status == 401
    assert (await anonymous.request("server/discover")).status == 200
    user = dev_identity.user_token(host_id=HOST)
    signed_in = McpTestClient(http, MODERN, {"Authorization": f"Bearer {user}"})
    assert (await signed_in.request("tools/list")).status == 200


@pytest.fixture
async def open_discovery(settings: Settings, app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    settings.server.anonymous_discovery = True
    attach_services(app, app.state.services, HANDLERS)
    async with asgi_client(app) as http:
        yield http


@pytest.mark.requirement("000:Request host and identity")
async def test_with_anonymous_discovery_tools_list_answers_without_a_bearer(
    open_discovery: httpx.AsyncClient,
) -> None:
    anonymous = McpTestClient(open_discovery, MODERN, {})
    assert (await anonymous.request("tools/list")).status == 200


def _params(method: str, era: str) -> dict[str, Any] | None:
    if method != "initialize":
        return None
    return {
        "protocolVersion": "2025-11-25" if era == LEGACY else MODERN,
        "capabilities": {},
        "clientInfo": {"name": "tests", "version": "1"},
    }
