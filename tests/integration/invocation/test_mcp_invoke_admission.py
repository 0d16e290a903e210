"""Admission step 7 through POST /mcp: task evidence, request bytes and the action authority."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.support.binding_builders import (
    HOST,
    binding,
    definition_yaml,
    endpoint_target,
    new_id,
    publish_args,
)
from tests.support.invocation import (
    Tool,
    invoke_args,
    ok,
    publish_tool,
    publish_version,
    refused,
    save_head,
    until_settled,
)
from tests.support.mcp import McpTestClient

Admin = psycopg.AsyncConnection[Any]


async def _write_tool(owner: McpTestClient) -> Tool:
    """An active write Tool whose task `save` POSTs to its covered endpoint target."""
    text = definition_yaml(write=True)
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    await publish_version(owner, wf_def_id, text, "1.2.0")
    value = binding(
        wf_def_id,
        new_id(),
        text,
        syncWaitMs=50,
        toolAnnotations={"readOnly": False, "destructive": False},
        idempotencyPolicy={"kind": "derived", "resultReplayMs": 600000},
    )
    args = publish_args(value, 0, endpoint_targets=[endpoint_target()])
    receipt = ok(await owner.call_tool("workflow_binding_publish", args))
    assert receipt["status"] == "active", receipt
    return Tool(
        tool_id=value["toolId"],
        wf_def_id=wf_def_id,
        binding_id=receipt["bindingId"],
        binding_digest=receipt["bindingDigest"],
        definition_digest=value["definitionDigest"],
        aggregate_version=receipt["aggregateVersion"],
        text=text,
    )


async def _count(admin: Admin, table: str) -> int:
    cursor = await admin.execute(
        f"SELECT count(*) AS n FROM {table} WHERE host_id = %s",
        (HOST,),
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


@pytest.mark.requirement("000:Task evidence")
async def test_a_write_task_without_its_evidence_row_is_refused_at_admission(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    tool = await _write_tool(owner)
    # What the projection sync left behind: an active revision without its evidence rows.
    await admin.execute(
        "DELETE FROM workflow_tool_approval_evidence_t WHERE binding_id = %s", (tool.binding_id,)
    )
    body = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_START_REJECTED"
    )
    assert "write task save has no approval evidence" in body["error"]["message"]
    # Nothing was admitted: no run, no reservation, no authority.
    assert await _count(admin, "workflow_invocation_t") == 0
    assert await _count(admin, "workflow_idempotency_t") == 0
    assert await _count(admin, "workflow_action_authority_t") == 0


@pytest.mark.requirement("000:Task evidence")
async def test_evidence_of_another_digest_does_not_admit_a_write_task(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    tool = await _write_tool(owner)
    await admin.execute(
        "UPDATE workflow_tool_approval_evidence_t SET evidence_digest = %s WHERE binding_id = %s",
        ("sha256:" + "0" * 64, tool.binding_id),
    )
    refused(await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_START_REJECTED")


@pytest.mark.requirement("000:Task evidence")
async def test_a_write_tool_with_its_evidence_is_admitted(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    tool = await _write_tool(owner)
    # No executor runs here: the short wait ends with the admitted run still accepted.
    body = refused(await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_TIMEOUT")
    assert body["workflowInstanceId"]
    assert await _count(admin, "workflow_invocation_t") == 1


@pytest.mark.requirement("000:Run credential selection")
async def test_an_admitted_run_writes_its_action_authority_with_the_run_id_as_grant(
    owner: McpTestClient, caller: McpTestClient, admin: Admin, workers: object
) -> None:
    tool = await publish_tool(owner)
    body = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool))))
    process_id = body["workflowInstanceId"]
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
    assert row["action_limit"] == 4  # runtimeBounds.maximumNestedCalls of the builder
    assert row["credential_kind"] == "invoke"
    assert row["user_id"] == "caller-1"


@pytest.mark.requirement("000:Admission")
async def test_an_input_over_maximum_request_bytes_is_refused_before_anything_is_stored(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    bounds = {**binding(new_id(), new_id(), definition_yaml())["runtimeBounds"]}
    bounds["maximumRequestBytes"] = 40
    tool = await publish_tool(owner, runtimeBounds=bounds, syncWaitMs=50)
    big = {"claimId": "C-" + "1" * 40}
    body = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool, big)), "WORKFLOW_INPUT_INVALID"
    )
    assert body["error"]["details"] == {"limit": "maximumRequestBytes", "maximum": 40, "size": 56}
    assert await _count(admin, "workflow_invocation_t") == 0
    assert await _count(admin, "workflow_idempotency_t") == 0
    # An input within the limit ({"claimId":"C-1"} is 17 bytes) is admitted.
    small = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-1"})),
        "WORKFLOW_TIMEOUT",
    )
    assert small["workflowInstanceId"]
