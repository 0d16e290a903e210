"""workflow_start writes the run's action authority in its admission transaction (seed 000)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from runtime.scheduler.service import DEFAULT_BUDGET
from tests.support.binding_builders import HOST, definition_yaml, new_id
from tests.support.invocation import ok, save_head
from tests.support.mcp import McpTestClient

Admin = psycopg.AsyncConnection[Any]


@pytest.mark.requirement("000:Admission")
async def test_a_start_writes_one_action_authority_row_with_the_run_id_as_grant(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    args = {"wfDefId": wf_def_id, "input": {"claimId": "C-1"}, "idempotencyKey": "k-1"}
    receipt = ok(await caller.call_tool("workflow_start", args))
    # The same key re-attaches to the run: no second authority row.
    again = ok(await caller.call_tool("workflow_start", args))
    process_id = receipt["workflowInstanceId"]
    assert again["workflowInstanceId"] == process_id
    cursor = await admin.execute(
        "SELECT a.grant_id, a.process_id::text AS process_id, a.deadline_ts, a.action_limit,"
        " a.credential_kind, a.user_id, p.deadline_ts AS run_deadline"
        " FROM workflow_action_authority_t a JOIN workflow_process p"
        " ON p.host_id = a.host_id AND p.process_id = a.process_id WHERE a.host_id = %s",
        (HOST,),
    )
    rows = await cursor.fetchall()
    assert len(rows) == 1
    row = rows[0]
    assert row["grant_id"] == process_id and row["process_id"] == process_id
    assert row["deadline_ts"] == row["run_deadline"]
    assert row["action_limit"] == DEFAULT_BUDGET.nested_calls
    assert row["credential_kind"] == "start"
    assert row["user_id"] == "caller-1"
