"""MCP calls of a published definition: live grants, permits, headers, the nested-call budget."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime.execution import (
    ExecutionSettings,
    WorkflowRuntime,
    close_waiter,
    start_workflow_run,
    wait_for_result,
)
from runtime.scheduler import BudgetAmounts
from runtime.security import Keyring, SecretToken
from runtime.security.keyring import new_keyring_document
from runtime.store import Database
from tests.integration.test_binding_support import publish_version, save_owner
from tests.integration.test_execution_support import LocalServer, executor, serving
from tests.integration.test_publication_support import HOST, context, grants_args
from tests.support.service_calls import sync_definition_grants, sync_grants_outside_the_contract

USER_TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1LTEiLCJleHAiOjQxMDI0NDQ4MDB9.dXNlcg"
APP_TOKEN = "app-token-for-tests"


def two_calls_yaml() -> str:
    call = "      call: mcp\n      with:\n        tool: {tool}\n        arguments: {{}}\n"
    return (
        "document:\n"
        '  dsl: "1.0.3"\n'
        "  namespace: claims\n"
        "  name: summarize-claim\n"
        '  version: "1.2.0"\n'
        "do:\n"
        "  - first:\n" + call.format(tool="accounts.lookup") + "  - second:\n"
        "" + call.format(tool="accounts.lookup")
    )


@pytest.fixture
async def published(db: Database) -> AsyncIterator[str]:
    """A published two-call definition whose grant covers accounts.lookup."""
    wf_def_id = str(uuid.uuid4())
    await save_owner(db, wf_def_id)
    await publish_version(db, wf_def_id, text=two_calls_yaml())
    await sync_grants_outside_the_contract(db, context(), wf_def_id, "g-1", "accounts.lookup")
    yield wf_def_id
    await close_waiter(db)


async def run_published(
    db: Database, server: LocalServer, wf_def_id: str, **kw: Any
) -> dict[str, Any]:
    keyring = Keyring.from_document(new_keyring_document("k1"))
    settings = ExecutionSettings(gateway_mcp_url=f"{server.base}/mcp", app_token=APP_TOKEN)
    async with executor(db, WorkflowRuntime(settings, keyring)):
        pid = await start_workflow_run(
            db, host_id=HOST, user_id="u-1", input={}, keyring=keyring,
            credential=SecretToken(USER_TOKEN), wf_def_id=wf_def_id, version="1.2.0", **kw,
        )  # fmt: skip
        run = await wait_for_result(db, HOST, pid, timeout=20)
    assert run is not None
    return run | {"process_id": pid}


async def test_mcp_calls_carry_the_user_token_app_token_and_a_recorded_action_permit(
    db: Database, published: str
) -> None:
    async with serving(LocalServer()) as server:
        run = await run_published(db, server, published)
    assert run["state"] == "COMPLETED", run
    assert len(server.tool_calls) == 2
    headers = server.tool_calls[0]["headers"]
    assert headers["authorization"] == f"Bearer {USER_TOKEN}"
    assert headers["x-scope-token"] == f"Bearer {APP_TOKEN}"
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
