"""Seed 000 Qualification Checklist: credentials, grants and the stack, on the live service.

The recording backend sees exactly what a run sends (its Authorization, X-Scope-Token and
action headers); the token-exchange endpoint counts the exchanges it performs (it plays
light-oauth); the service's database says what is stored.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx
import msgspec
import pytest

from runtime.security import KeySet, TokenKind, TokenVerifier
from runtime.settings import Settings
from tests.support.binding_builders import dependency, new_id
from tests.support.invocation import client, ok, refused, until_settled
from tests.support.live_credentials import credential_gone, sealed_credential, start_two_calls
from tests.support.live_stack import QualStack, keyless_server
from tests.support.live_tools import (
    REPLAYING,
    get_definition,
    invoke,
    mcp_calls_definition,
    publish_live_tool,
    runs_of,
)
from tests.support.mcp import McpTestClient
from tests.support.protected_backend import calling_definition, http_task
from tests.support.publication_builders import grants_args
from tests.support.scale_out import scalar
from tests.support.server import REPO_ROOT
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.requirement("000:Qualification Checklist"), pytest.mark.timeout(90)]

FDW_CATALOGS = ("pg_foreign_server", "pg_user_mapping", "pg_foreign_data_wrapper")
# What creates or uses a foreign server (a comment saying "on the server" is not one).
FDW_WORDS = (
    "FOREIGN DATA WRAPPER",
    "CREATE SERVER",
    "ALTER SERVER",
    "USER MAPPING",
    "_FDW",
    "FOREIGN TABLE",
    "FOREIGN SCHEMA",
)


async def test_item_18_an_acknowledged_grant_revocation_stops_the_next_call_of_a_running_run(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """18: "An acknowledged grant revocation stops the next call of a running workflow that
    needs it." """
    nested = dependency("qual18.lookup")
    grant = {
        "grantId": new_id(),
        "toolId": nested["nestedToolId"],
        "toolVersion": nested["nestedToolVersion"],
        "lightapiDigest": "sha256:" + "a" * 64,
        "allowedEnvironments": ["dev"],
    }
    text = mcp_calls_definition("qual18.lookup", calls=2)
    tool = await publish_live_tool(owner, text, dependencies=[nested])
    ok(
        await owner.call_tool(
            "workflow_definition_grants_sync", grants_args(tool.wf_def_id, 1, [grant])
        )
    )
    held = "mcp:qual18.lookup"
    qual_stack.backend.hold(held)
    try:
        running = asyncio.create_task(invoke(caller, tool))
        await wait_until(
            lambda: len(qual_stack.backend.requests_to(held)) == 1 or running.done(),
            what="the run's first nested call at the Gateway",
        )
        assert not running.done()
        revoked = ok(
            await owner.call_tool(
                "workflow_definition_grants_sync", grants_args(tool.wf_def_id, 2, [])
            )
        )
        assert revoked["result"] == "saved"
    finally:
        qual_stack.backend.release(held)
    body = refused(await running, "WORKFLOW_POLICY_DENIED")
    assert body["status"] == "failed"
    assert "no live grant" in body["error"]["message"]
    calls = qual_stack.backend.requests_to(held)
    assert len(calls) == 1  # the second call never left
    first = calls[0].headers
    assert first["authorization"] == caller.auth["Authorization"]
    assert first["x-workflow-action"]
    # Workflow's own application token, from its client-credentials grant.
    security = qual_stack.identity.settings()
    scope = first["x-scope-token"].removeprefix("Bearer ")
    claims = TokenVerifier(security, KeySet.from_settings(security)).verify(scope, TokenKind.APP)
    assert claims["sub"] == qual_stack.service_tokens.client_id
    assert qual_stack.service_tokens.grants >= 1


async def test_item_20_the_stack_works_with_no_projection_sync_and_no_fdw_server(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """20 (our stack: there is no projection sync; publication goes through MCP): "The local
    stack works with workflow-projection-sync removed and no FDW server configured." """
    for catalog in FDW_CATALOGS:
        assert await qual_stack.count(f"SELECT count(*) FROM {catalog}") == 0, catalog
    extension = "SELECT count(*) FROM pg_extension WHERE extname = 'postgres_fdw'"
    assert await qual_stack.count(extension) == 0
    for migration in sorted((REPO_ROOT / "migrations").glob("*.sql")):
        upper = migration.read_text(encoding="utf-8").upper()
        assert not [word for word in FDW_WORDS if word in upper], migration.name
    # The running service on that database publishes through MCP and serves the Tool.
    uri = qual_stack.unique_path("item20")
    tool = await publish_live_tool(owner, get_definition(uri), (uri,))
    assert ok(await invoke(caller, tool))["status"] == "completed"


def test_item_21_validate_contracts_passes() -> None:
    """21 (our validator is `python -m codegen.validate`, `make validate-contracts`):
    "validate-contracts.mjs passes." """
    done = subprocess.run(
        [sys.executable, "-m", "codegen.validate"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


async def test_item_26_invoke_uses_the_original_token_never_exchanges_and_forgets_it(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """26: "workflow_invoke makes no light-oauth call. The run's outbound calls carry the
    original user token, and the stored token is gone after the run ends." """
    uri = qual_stack.unique_path("item26")
    text = calling_definition(
        http_task("first", "GET", uri, authenticated=True, write=False),
        http_task("second", "GET", uri, authenticated=True, write=False),
    )
    tool = await publish_live_tool(owner, text, (uri,), syncWaitMs=500, idempotencyPolicy=REPLAYING)
    exchange_calls = qual_stack.exchange_traffic.calls
    qual_stack.backend.hold(uri)
    try:
        pending = refused(await invoke(caller, tool), "WORKFLOW_TIMEOUT")
        instance = pending["workflowInstanceId"]
        stored = await sealed_credential(qual_stack, instance)
        assert stored is not None
        token = caller.auth["Authorization"].removeprefix("Bearer ")
        assert token.encode() not in stored
    finally:
        qual_stack.backend.release(uri)
    done = ok(await until_settled(lambda: invoke(caller, tool)))
    assert done["workflowInstanceId"] == instance
    seen = [request.headers.get("authorization") for request in qual_stack.backend.requests_to(uri)]
    assert seen == [caller.auth["Authorization"]] * 2
    assert qual_stack.exchange_traffic.calls == exchange_calls  # light-oauth never called
    await wait_until(
        lambda: credential_gone(qual_stack, instance), what="the run credential deleted"
    )


async def test_item_27_invoke_is_rejected_when_no_sealing_key_is_configured(
    qual_stack: QualStack, owner: McpTestClient, tmp_path: Path
) -> None:
    """27: "workflow_invoke is rejected when no vault key is configured." """
    uri = qual_stack.unique_path("item27")
    tool = await publish_live_tool(owner, get_definition(uri), (uri,))
    with keyless_server(qual_stack.database_url, tmp_path, qual_stack.identity) as keyless:
        async with httpx.AsyncClient(base_url=keyless.base_url, timeout=60.0) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["checks"]["keyring"] is False
            body = refused(
                await invoke(client(http, qual_stack.identity), tool), "WORKFLOW_START_REJECTED"
            )
    assert "sealing key" in body["error"]["message"]
    assert "workflowInstanceId" not in body
    assert await qual_stack.count(*runs_of(tool)) == 0
    credentials = "SELECT count(*) FROM workflow_run_credential c JOIN workflow_process p"
    credentials += " USING (host_id, process_id) WHERE p.binding_id = %s"
    assert await qual_stack.count(credentials, tool.binding_id) == 0
    assert qual_stack.backend.requests_to(uri) == []


async def test_item_28_a_start_run_uses_a_valid_original_token_then_the_exchanged_one(
    qual_stack: QualStack, owner: McpTestClient, live_http: httpx.AsyncClient
) -> None:
    """28: "A workflow_start run whose original token is still valid makes outbound calls with
    that token and does not call light-oauth. Once the token is within the margin, it switches
    to the exchanged token." """
    long_lived, long_seen, long_exchanges = await start_two_calls(
        qual_stack, owner, live_http, expires_at=int(time.time()) + 2 * 86400
    )
    assert long_seen == [f"Bearer {long_lived}"] * 2
    assert long_exchanges == 0
    # 120 s left: inside the 300 s margin, still long enough to be admitted.
    short_lived, short_seen, short_exchanges = await start_two_calls(
        qual_stack, owner, live_http, ttl=120
    )
    assert short_exchanges == 1  # once; the second call used the stored exchanged token
    assert qual_stack.exchange.exchanges >= 1  # and that one request was an exchange
    assert short_seen[0] == short_seen[1] != f"Bearer {short_lived}"


async def test_item_29_no_outbound_call_uses_the_retired_grant_broker(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """29: "No outbound call uses the retired grant broker." """
    assert "broker" not in msgspec.json.encode(Settings()).decode().lower()  # nothing to set
    uri = qual_stack.unique_path("item29")
    text = get_definition(uri, authenticated=True)
    tool = await publish_live_tool(owner, text, (uri,))
    exchange_calls = qual_stack.exchange_traffic.calls
    invoked = ok(await invoke(caller, tool))
    started = ok(await caller.call_tool("workflow_start", {"wfDefId": tool.wf_def_id, "input": {}}))
    waited = ok(
        await caller.call_tool(
            "workflow_wait_result", {"workflowInstanceId": started["workflowInstanceId"]}
        )
    )
    assert waited["state"] == "COMPLETED", waited
    kinds = "SELECT credential_kind FROM workflow_action_authority_t WHERE process_id = %s"
    assert await scalar(qual_stack.database_url, kinds, invoked["workflowInstanceId"]) == "invoke"
    assert await scalar(qual_stack.database_url, kinds, started["workflowInstanceId"]) == "start"
    broker = "SELECT count(*) FROM workflow_action_authority_t WHERE credential_kind = 'broker'"
    assert await qual_stack.count(broker) == 0
    # Both runs called the backend with the user's own token, and called nothing else: no
    # credential service (no broker exists; the token exchange was not needed either).
    assert qual_stack.exchange_traffic.calls == exchange_calls
    seen = qual_stack.backend.requests_to(uri)
    assert [request.headers["authorization"] for request in seen] == [
        caller.auth["Authorization"]
    ] * 2
