"""Workflow's own token for nested MCP calls: a client-credentials grant, renewed in time.

A real token endpoint (the dev identity's, over HTTP) issues short-lived application tokens; a
Gateway stand-in verifies X-Scope-Token the moment each request arrives.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx
import msgspec
import pytest

from runtime.collaborators import Services
from runtime.composition.bootstrap import (
    DEV_CLIENT_CREDENTIALS_PATH,
    apply_dev_identity,
    dev_token_routes,
)
from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.execution.service_token import ServiceTokenError, ServiceTokens
from runtime.execution.settings import ServiceTokenSettings
from runtime.mcp.app import create_app
from runtime.security import KeySet, TokenKind, TokenVerifier
from runtime.security.dev_client_credentials import DEV_SERVICE_CLIENT_ID
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from runtime.store import Database
from tests.support.binding_builders import HOST, publish_version, save_owner
from tests.support.execution import serving
from tests.support.invocation import client, ok
from tests.support.mcp import McpTestClient
from tests.support.publication_builders import context
from tests.support.service_calls import sync_grants_outside_the_contract
from tests.support.service_tokens import (
    SERVICE_SECRET,
    GatewayAndEndpointFactory,
    ScopeCheckingGateway,
    TokenEndpoint,
    expiry,
    fork_calls_yaml,
    run_nested,
    service_token_settings,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("000:Parent action")

# Long enough for a run's first call, short enough that a test outlives it.
SHORT_TTL_S = 4
READS = ("accounts.lookup",)


async def test_a_nested_call_keeps_working_across_the_expiry_of_the_first_service_token(
    db: Database, published: str, gateway_and_endpoint: GatewayAndEndpointFactory
) -> None:
    async with gateway_and_endpoint(ttl=SHORT_TTL_S) as served:
        gateway, endpoint = served.gateway, served.endpoint

        async def outlive_the_first_token() -> None:
            if len(gateway.tool_calls) == 1:
                first = expiry(gateway.tool_calls[0]["scope"])
                await wait_until(lambda: time.time() > first, what="the first token expired")

        gateway.on_tool_call = outlive_the_first_token
        # Renewed at half its life: a loaded machine still sends it well before its expiry.
        run = await run_nested(db, served.settings(renew_fraction=0.5), published)
    assert run["state"] == "COMPLETED", run
    first, second = gateway.scope_tokens()
    assert first != second and expiry(second) > expiry(first)
    # Renewed before it was needed: the Gateway never refused a token.
    assert gateway.refusals == []
    assert endpoint.grants == 2


async def test_many_concurrent_callers_share_one_grant(
    dev_identity: DevIdentity, tmp_path: Path
) -> None:
    endpoint = TokenEndpoint(dev_identity.client_credentials(SERVICE_SECRET, ttl=SHORT_TTL_S))
    async with serving(endpoint):
        tokens = ServiceTokens.from_settings(service_token_settings(endpoint, tmp_path))
        assert tokens is not None
        first = await _one_grant_for_many(endpoint, tokens, grants=1)
        await wait_until(lambda: time.time() > expiry(first), what="the first token expired")
        second = await _one_grant_for_many(endpoint, tokens, grants=2)
    assert second != first


async def _one_grant_for_many(endpoint: TokenEndpoint, tokens: ServiceTokens, grants: int) -> str:
    """64 callers at once while the endpoint holds its answer: they get one token of one grant."""
    endpoint.held = asyncio.Event()
    callers = [asyncio.create_task(tokens.token()) for _ in range(64)]
    # Every caller joined the one grant before it could reach the endpoint (tasks run in order).
    await wait_until(lambda: endpoint.requests == grants, what="the grant arrived")
    endpoint.held.set()
    issued = {token.reveal() for token in await asyncio.gather(*callers)}
    assert len(issued) == 1 and endpoint.requests == endpoint.grants == grants
    return issued.pop()


async def test_concurrent_nested_calls_of_a_fork_carry_one_token_from_one_grant(
    db: Database, gateway_and_endpoint: GatewayAndEndpointFactory
) -> None:
    wf_def_id = str(uuid.uuid4())
    await save_owner(db, wf_def_id)
    await publish_version(db, wf_def_id, text=fork_calls_yaml(8))
    await sync_grants_outside_the_contract(db, context(), wf_def_id, "g-1", "accounts.lookup")
    async with gateway_and_endpoint() as served:
        gateway, endpoint = served.gateway, served.endpoint
        run = await run_nested(db, served.settings(), wf_def_id, read_only=READS)
    assert run["state"] == "COMPLETED", run
    assert len(gateway.tool_calls) == 8 and len(set(gateway.scope_tokens())) == 1
    assert endpoint.grants == 1


@pytest.mark.parametrize("refuse_at", ["initialize", "call"])
async def test_a_refused_token_is_renewed_once_and_a_read_sent_again(
    db: Database, published: str, gateway_and_endpoint: GatewayAndEndpointFactory, refuse_at: str
) -> None:
    async with gateway_and_endpoint(refuse_at=refuse_at) as served:
        gateway, endpoint = served.gateway, served.endpoint
        # The token the process holds is revoked at the Gateway before its expiry.
        settings, tokens = await served.revoked_token()
        run = await run_nested(db, settings, published, read_only=READS, service_tokens=tokens)
    assert run["state"] == "COMPLETED", run
    assert gateway.refusals == [refuse_at] and endpoint.grants == 2
    assert len(gateway.tool_calls) == 2 and len(set(gateway.scope_tokens())) == 1


async def test_concurrent_calls_refused_with_one_token_share_one_renewal(
    db: Database, gateway_and_endpoint: GatewayAndEndpointFactory
) -> None:
    wf_def_id = str(uuid.uuid4())
    await save_owner(db, wf_def_id)
    await publish_version(db, wf_def_id, text=fork_calls_yaml(8))
    await sync_grants_outside_the_contract(db, context(), wf_def_id, "g-1", "accounts.lookup")
    async with gateway_and_endpoint(refuse_at="initialize") as served:
        gateway, endpoint = served.gateway, served.endpoint
        settings, tokens = await served.revoked_token()
        # The renewal is held until all eight calls were refused: they all wait on one grant.
        endpoint.held = asyncio.Event()
        release = asyncio.create_task(_release_after(endpoint.held, gateway, refusals=8))
        run = await run_nested(db, settings, wf_def_id, read_only=READS, service_tokens=tokens)
        await release
    assert run["state"] == "COMPLETED", run
    assert len(gateway.tool_calls) == 8 and len(set(gateway.scope_tokens())) == 1
    assert len(gateway.refusals) == 8 and endpoint.requests == endpoint.grants == 2


async def _release_after(held: asyncio.Event, gateway: ScopeCheckingGateway, refusals: int) -> None:
    await wait_until(lambda: len(gateway.refusals) == refusals, what="every call refused")
    held.set()


async def test_a_write_refused_at_its_tools_call_is_not_sent_again(
    db: Database, published: str, gateway_and_endpoint: GatewayAndEndpointFactory
) -> None:
    async with gateway_and_endpoint(refuse_at="call") as served:
        gateway, endpoint = served.gateway, served.endpoint
        settings, tokens = await served.revoked_token()
        run = await run_nested(db, settings, published, service_tokens=tokens)
    assert run["state"] == "FAILED", run
    assert "the Gateway refused the call" in run["error"]["message"]
    assert gateway.refusals == ["call"] and gateway.tool_calls == []
    assert endpoint.grants == 1  # nothing to send again, so nothing renewed


async def test_a_write_refused_before_its_tools_call_is_sent_again_with_a_renewed_token(
    db: Database, published: str, gateway_and_endpoint: GatewayAndEndpointFactory
) -> None:
    async with gateway_and_endpoint(refuse_at="initialize") as served:
        gateway = served.gateway
        settings, tokens = await served.revoked_token()
        run = await run_nested(db, settings, published, service_tokens=tokens)
    assert run["state"] == "COMPLETED", run
    assert gateway.refusals == ["initialize"] and len(gateway.tool_calls) == 2


async def test_without_a_token_the_nested_call_fails_before_it_leaves(
    db: Database, published: str, gateway_and_endpoint: GatewayAndEndpointFactory
) -> None:
    async with gateway_and_endpoint(secret="another-secret") as served:
        gateway = served.gateway
        run = await run_nested(db, served.settings(), published)
    assert run["state"] == "FAILED", run
    assert "Workflow's service token is unavailable" in run["error"]["message"]
    assert gateway.tool_calls == [] and gateway.refusals == []
    assert SERVICE_SECRET not in str(run["error"])


async def test_make_run_gets_workflows_token_from_the_dev_identitys_own_endpoint(
    tmp_path: Path,
) -> None:
    settings = Settings()
    settings.store.data_dir = str(tmp_path)
    identity = apply_dev_identity(settings)
    assert identity is not None
    configured = settings.execution.outbound.service_token
    assert configured.endpoint == f"http://127.0.0.1:8787{DEV_CLIENT_CREDENTIALS_PATH}"
    app = create_app()
    for route in dev_token_routes(identity):
        app.register(route)
    served = msgspec.structs.replace(
        configured, endpoint=f"http://localhost{DEV_CLIENT_CREDENTIALS_PATH}"
    )
    tokens = ServiceTokens.from_settings(served, httpx.ASGITransport(app=app))
    assert tokens is not None
    token = await tokens.token()
    # What `make gateway` (the same security settings) accepts as an application bearer.
    verifier = TokenVerifier(settings.security, KeySet.from_settings(settings.security))
    claims = verifier.verify(token.reveal(), TokenKind.APP)
    assert claims["sub"] == configured.client_id and "host" not in claims
    # The client is authenticated: another secret gets no token.
    Path(str(configured.client_secret_file)).write_text("not-the-secret", encoding="utf-8")
    stranger = ServiceTokens.from_settings(served, httpx.ASGITransport(app=app))
    assert stranger is not None
    with pytest.raises(ServiceTokenError, match="HTTP 401"):
        await stranger.token()


STORED_NAME = "serviceClientSecret"
ROTATED_SECRET = "service-client-secret-rotated"


def _stored_secret_settings(endpoint: TokenEndpoint) -> ExecutionSettings:
    return ExecutionSettings(
        service_token=ServiceTokenSettings(
            endpoint=f"{endpoint.base}/token",
            client_id=DEV_SERVICE_CLIENT_ID,
            client_secret_name=STORED_NAME,
            client_secret_host=HOST,
        )
    )


def _runtime(endpoint: TokenEndpoint, services: Services) -> WorkflowRuntime:
    """A runtime whose service token's client secret is the host secret STORED_NAME."""
    return WorkflowRuntime.verifying(
        _stored_secret_settings(endpoint),
        services.keyring,
        services.settings.security,
        database=services.database,
    )


async def _put_secret(admin: McpTestClient, value: str) -> None:
    ok(
        await admin.call_tool(
            "workflow_secret_put",
            {"hostId": HOST, "name": STORED_NAME, "value": value, "operationId": str(uuid.uuid4())},
        )
    )


async def test_a_client_secret_kept_in_the_host_secret_store_is_read_at_every_grant(
    http: httpx.AsyncClient, services: Services, dev_identity: DevIdentity
) -> None:
    admin = client(http, dev_identity, "secret-admin", roles=("host-admin",))
    await _put_secret(admin, SERVICE_SECRET)
    endpoint = TokenEndpoint(dev_identity.client_credentials(SERVICE_SECRET))
    async with serving(endpoint):
        tokens = _runtime(endpoint, services).service_tokens
        assert tokens is not None
        first = await tokens.token()
        # Rotated in the store and at the endpoint: the next grant sends the new secret.
        await _put_secret(admin, ROTATED_SECRET)
        endpoint.endpoint = dev_identity.client_credentials(ROTATED_SECRET)
        second = await tokens.refresh(first)
    assert second is not None and second.reveal() != first.reveal()
    # Two requests; the second granted by the endpoint that knows only the rotated secret.
    assert endpoint.requests == 2 and endpoint.grants == 1


async def test_a_client_secret_missing_from_the_store_is_named_not_sent(
    services: Services, dev_identity: DevIdentity
) -> None:
    endpoint = TokenEndpoint(dev_identity.client_credentials(SERVICE_SECRET))
    async with serving(endpoint):
        tokens = _runtime(endpoint, services).service_tokens
        assert tokens is not None
        with pytest.raises(ServiceTokenError, match=STORED_NAME):
            await tokens.token()
    assert endpoint.requests == 0


def test_the_client_secret_comes_from_exactly_one_place(tmp_path: Path) -> None:
    base = {"endpoint": "http://127.0.0.1:1/token", "client_id": DEV_SERVICE_CLIENT_ID}
    stored = {"client_secret_name": STORED_NAME, "client_secret_host": HOST}
    with pytest.raises(ValueError, match="one client secret"):
        ServiceTokenSettings(**base, **stored, client_secret_file=str(tmp_path / "s"))
    with pytest.raises(ValueError, match="client_secret_host"):
        ServiceTokenSettings(**base, client_secret_name=STORED_NAME)
    with pytest.raises(ValueError, match="one client secret"):
        ServiceTokenSettings(**base)
    # Without the store (a process given no database) such settings are refused, not ignored.
    with pytest.raises(ValueError, match="secret store"):
        ServiceTokens.from_settings(ServiceTokenSettings(**base, **stored))
