"""MCP calls of a published definition: live grants, permits, headers, the nested-call budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from runtime.execution import (
    ExecutionSettings,
    WorkflowRuntime,
    wait_for_result,
)
from runtime.scheduler import BudgetAmounts
from runtime.security import Keyring, KeySet, SecretToken, TokenKind, TokenVerifier
from runtime.security.dev_client_credentials import DEV_SERVICE_CLIENT_ID
from runtime.security.devtools import DevIdentity
from runtime.security.keyring import new_keyring_document
from runtime.store import Database
from tests.support.execution import LOCAL_BACKENDS, LocalServer, executor, serving
from tests.support.execution_runs import start_workflow_run
from tests.support.publication_builders import HOST, context, grants_args
from tests.support.published_workflow import USER_TOKEN
from tests.support.service_calls import sync_definition_grants
from tests.support.service_tokens import SERVICE_SECRET, TokenEndpoint, service_token_settings


async def run_published(
    db: Database,
    server: LocalServer,
    wf_def_id: str,
    settings: ExecutionSettings | None = None,
    **kw: Any,
) -> dict[str, Any]:
    keyring = Keyring.from_document(new_keyring_document("k1"))
    settings = settings or ExecutionSettings(gateway_mcp_url=f"{server.base}/mcp")
    async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
        pid = await start_workflow_run(
            db, host_id=HOST, user_id="u-1", input={}, keyring=keyring,
            credential=SecretToken(USER_TOKEN), wf_def_id=wf_def_id, version="1.2.0", **kw,
        )  # fmt: skip
        run = await wait_for_result(db, HOST, pid, timeout=20)
    assert run is not None
    return msgspec.structs.asdict(run) | {"process_id": pid}


async def test_mcp_calls_carry_the_user_token_app_token_and_a_recorded_action_permit(
    db: Database, published: str, dev_identity: DevIdentity, tmp_path: Path
) -> None:
    endpoint = TokenEndpoint(dev_identity.client_credentials(SERVICE_SECRET))
    async with serving(LocalServer()) as server, serving(endpoint):
        service_token = service_token_settings(endpoint, tmp_path)
        settings = ExecutionSettings(
            gateway_mcp_url=f"{server.base}/mcp", service_token=service_token
        )
        run = await run_published(db, server, published, settings)
    assert run["state"] == "COMPLETED", run
    assert len(server.tool_calls) == 2
    headers = server.tool_calls[0]["headers"]
    assert headers["authorization"] == f"Bearer {USER_TOKEN}"
    # Workflow's own token, from its client-credentials grant (one for both calls).
    scope = headers["x-scope-token"].removeprefix("Bearer ")
    verifier = TokenVerifier(dev_identity.settings(), KeySet.from_settings(dev_identity.settings()))
    assert verifier.verify(scope, TokenKind.APP)["sub"] == DEV_SERVICE_CLIENT_ID
    assert endpoint.grants == 1
    assert server.tool_calls[1]["headers"]["x-scope-token"] == headers["x-scope-token"]
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT action_id::text AS id, grant_id, tool_name, user_id, depth"
            " FROM workflow_action_permit WHERE process_id = %s",
            (run["process_id"],),
        )
        permits = await cursor.fetchall()
    assert {p["id"] for p in permits} == {
        c["headers"]["x-workflow-action"] for c in server.tool_calls
    }
    assert all(
        (p["grant_id"], p["tool_name"], p["user_id"], p["depth"])
        == ("g-1", "accounts.lookup", "u-1", 0)
        for p in permits
    )


async def test_a_revoked_grant_stops_the_next_mcp_call_of_a_running_workflow(
    db: Database, published: str
) -> None:
    server = LocalServer()

    async def revoke() -> None:
        if len(server.tool_calls) == 1:
            await sync_definition_grants(db, context(), grants_args(published, 2, []))

    server.on_tool_call = revoke
    async with serving(server):
        run = await run_published(db, server, published)
    assert run["state"] == "FAILED" and run["error"]["code"] == "WORKFLOW_POLICY_DENIED"
    assert len(server.tool_calls) == 1


async def test_mcp_calls_beyond_the_nested_call_budget_fail_with_budget_exhausted(
    db: Database, published: str
) -> None:
    budget = BudgetAmounts(
        attempts=10, nested_calls=1, request_bytes=1000, intermediate_bytes=1 << 20, cost_units=99
    )
    async with serving(LocalServer()) as server:
        run = await run_published(db, server, published, budget=budget)
    assert run["error"]["code"] == "WORKFLOW_BUDGET_EXHAUSTED"
    assert len(server.tool_calls) == 1
