"""workflow_start runs exchange their user token (RFC 8693) once it is within the margin."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from runtime.collaborators import Services
from runtime.composition.bootstrap import (
    DEV_TOKEN_EXCHANGE_PATH,
    apply_dev_identity,
    dev_token_routes,
)
from runtime.errors import AuthenticationError
from runtime.execution import ExecutionSettings
from runtime.execution.token_exchange import TokenExchanger
from runtime.mcp.app import create_app
from runtime.security import KeySet, SecretToken, TokenExchangeSettings, TokenKind, TokenVerifier
from runtime.security.dev_token_exchange import DEV_EXCHANGE_CLIENT_ID, DevTokenExchange
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from tests.support.binding_builders import HOST, new_id
from tests.support.execution import LocalServer, serving
from tests.support.invocation import CALLER, ok, refused, save_head
from tests.support.mcp import MODERN, McpTestClient
from tests.support.protected_backend import (
    ProtectedBackend,
    calling_definition,
    http_task,
    verifying_executor,
)
from tests.support.tokens import auth_headers

pytestmark = pytest.mark.requirement("000:Run credential selection")

SECRET = "dev-exchange-secret"


@pytest.fixture
async def backend() -> AsyncIterator[ProtectedBackend]:
    async with serving(ProtectedBackend()) as running:  # type: ignore[arg-type]
        yield running


@pytest.fixture
async def gateway() -> AsyncIterator[ProtectedBackend]:
    """The Gateway's origin: a second protected server, apart from the approved endpoint."""
    async with serving(ProtectedBackend()) as running:  # type: ignore[arg-type]
        yield running


@pytest.fixture
async def exchange(
    dev_identity: DevIdentity, settings: Settings
) -> AsyncIterator[DevTokenExchange]:
    """The dev identity's exchange endpoint, configured in the service's settings."""
    endpoint = dev_identity.token_exchange(SECRET)
    async with serving(endpoint) as running:  # type: ignore[arg-type]
        settings.security.run_credential.token_exchange = TokenExchangeSettings(
            endpoint=f"http://127.0.0.1:{running.port}/token",  # type: ignore[attr-defined]
            client_id=DEV_EXCHANGE_CLIENT_ID,
            client_secret=SECRET,
        )
        yield endpoint


def _starter(
    http: httpx.AsyncClient, identity: DevIdentity, **token: Any
) -> tuple[McpTestClient, str]:
    user = identity.user_token(
        host_id=HOST, user_id=CALLER, roles=("workflow-admin",), client_id="portal", **token
    )
    app = identity.app_token(host_id=HOST)
    return McpTestClient(http, MODERN, auth_headers(identity, user, app)), user


async def _run(
    starter: McpTestClient,
    owner: McpTestClient,
    services: Services,
    direct: str,
    gateway: ProtectedBackend | None,
    *tasks: str,
) -> dict[str, Any]:
    """Start the tasks (two protected GETs of direct/claims by default); the wait's result."""
    uri = f"{direct}/claims"
    text = calling_definition(
        *tasks
        or (
            http_task("first", "GET", uri, authenticated=True, write=False),
            http_task("second", "GET", uri, authenticated=True, write=False),
        )
    )
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    receipt = ok(await starter.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))
    instance = {"workflowInstanceId": receipt["workflowInstanceId"], "waitMs": 20000}
    settings = ExecutionSettings(
        http_allowlist=[direct],
        gateway_mcp_url=None if gateway is None else f"{gateway.base}/mcp",
    )
    async with verifying_executor(services, settings):
        return await starter.call_tool("workflow_wait_result", instance)


def _caller_tokens(identity: DevIdentity) -> Any:
    verifier = TokenVerifier(identity.settings(), KeySet.from_settings(identity.settings()))

    def accept(token: str) -> bool:
        return verifier.verify(token, TokenKind.USER)["sub"] == CALLER

    return accept


@pytest.mark.requirement("000:QC-28")
async def test_a_token_within_the_margin_is_exchanged_sealed_and_used_for_every_later_call(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: ProtectedBackend,
    gateway: ProtectedBackend,
    exchange: DevTokenExchange,
) -> None:
    # Inside the 300 s margin, yet still long enough to be admitted and verified.
    starter, user = _starter(http, dev_identity, ttl=120)
    gateway.accept = _caller_tokens(dev_identity)
    done = ok(await _run(starter, owner, services, backend.base, gateway))
    assert done["state"] == "COMPLETED", done
    assert exchange.exchanges == 1  # the second call used the stored exchanged token
    # Both calls carried the exchanged token, so both went to the Gateway origin: the second
    # (a later task) knew it from the stored credential.
    assert len(gateway.seen) == 2 and gateway.seen[0] == gateway.seen[1]
    assert gateway.seen[0] != f"Bearer {user}" and backend.seen == []


@pytest.mark.requirement("000:QC-28")
async def test_after_an_exchange_protected_calls_go_to_the_gateway_origin_others_direct(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    gateway: ProtectedBackend,
    exchange: DevTokenExchange,
) -> None:
    starter, user = _starter(http, dev_identity, ttl=120)
    gateway.accept = _caller_tokens(dev_identity)
    async with serving(LocalServer()) as direct:
        protected = http_task(
            "protected", "GET", f"{direct.base}/claims/C-1", authenticated=True, write=False
        )
        public = http_task(
            "public", "GET", f"{direct.base}/rates", authenticated=False, write=False
        )
        result = await _run(starter, owner, services, direct.base, gateway, protected, public)
    assert ok(result)["state"] == "COMPLETED"
    assert exchange.exchanges == 1
    # The protected call kept its approved path, on the Gateway's origin, with the new token.
    assert gateway.paths == ["/claims/C-1"] and gateway.seen[0] != f"Bearer {user}"
    # The call that carries no run token is not rerouted.
    assert [(r["path"], r["headers"].get("authorization")) for r in direct.requests] == [
        ("/rates", None)
    ]


@pytest.mark.requirement("000:QC-28")
async def test_an_exchanged_run_with_no_gateway_configured_sends_nothing_directly(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: ProtectedBackend,
    exchange: DevTokenExchange,
) -> None:
    starter, _ = _starter(http, dev_identity, ttl=120)
    backend.accept = _caller_tokens(dev_identity)
    result = await _run(starter, owner, services, backend.base, None)
    body = refused(result, "WORKFLOW_POLICY_DENIED")
    assert "execution.outbound.gateway_mcp_url" in body["error"]["message"]
    assert exchange.exchanges == 1 and backend.seen == []


@pytest.mark.requirement("000:QC-28")
async def test_a_token_well_before_its_expiry_is_used_as_is_with_no_exchange(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: ProtectedBackend,
    gateway: ProtectedBackend,
    exchange: DevTokenExchange,
) -> None:
    starter, user = _starter(http, dev_identity, expires_at=int(time.time()) + 2 * 86400)
    backend.accepted.add(user)
    done = ok(await _run(starter, owner, services, backend.base, gateway))
    assert done["state"] == "COMPLETED", done
    assert exchange.exchanges == 0
    # The original token, still valid: the approved endpoint directly, never the Gateway.
    assert backend.seen == [f"Bearer {user}"] * 2 and gateway.seen == []


@pytest.mark.requirement("000:QC-28")
async def test_with_no_exchange_endpoint_a_start_outliving_its_token_uses_it_while_it_verifies(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: ProtectedBackend,
    gateway: ProtectedBackend,
) -> None:
    # Seed 000 X-3: no LONG registration, so selector rule 3: the original token while it
    # verifies (its call fails with an authentication error once it does not); the start is
    # not refused for a token that ends before the run's 30-day deadline.
    starter, user = _starter(http, dev_identity, ttl=3600)
    backend.accepted.add(user)
    done = ok(await _run(starter, owner, services, backend.base, gateway))
    assert done["state"] == "COMPLETED", done
    assert backend.seen == [f"Bearer {user}"] * 2 and gateway.seen == []


@pytest.mark.requirement("000:QC-28")
async def test_make_run_exchanges_at_the_dev_identitys_own_endpoint_with_client_authentication(
    tmp_path: Path,
) -> None:
    settings = Settings()
    settings.store.data_dir = str(tmp_path)
    identity = apply_dev_identity(settings)
    assert identity is not None
    configured = settings.security.run_credential.token_exchange
    assert configured.endpoint == f"http://127.0.0.1:8787{DEV_TOKEN_EXCHANGE_PATH}"
    app = create_app()
    for route in dev_token_routes(identity):
        app.register(route)
    transport = httpx.ASGITransport(app=app)
    served = f"http://localhost{DEV_TOKEN_EXCHANGE_PATH}"
    exchanger = TokenExchanger.from_settings(
        msgspec.structs.replace(configured, endpoint=served), transport
    )
    assert exchanger is not None
    original = identity.user_token(user_id=CALLER)
    exchanged = await exchanger.exchange(SecretToken(original))
    verifier = TokenVerifier(settings.security, KeySet.from_settings(settings.security))
    claims = verifier.verify(exchanged.reveal(), TokenKind.USER)
    assert claims["sub"] == CALLER and exchanged.reveal() != original
    impostor = dataclasses.replace(exchanger, client_secret=SecretToken("not-the-secret"))
    with pytest.raises(AuthenticationError):
        await impostor.exchange(SecretToken(original))
