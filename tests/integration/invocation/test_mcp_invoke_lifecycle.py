"""workflow_start and the lifecycle tools through POST /mcp, scoped to the starting user."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import definition_yaml, new_id
from tests.support.invocation import (
    FAILING_TASK,
    client,
    invoke_args,
    ok,
    publish_tool,
    refused,
    save_head,
)
from tests.support.mcp import McpTestClient
from tests.support.publication_builders import OTHER_HOST

pytestmark = pytest.mark.requirement("001:Workflow Start and Invocation API")


async def _start(client: McpTestClient, wf_def_id: str, **extra: Any) -> dict[str, Any]:
    args = {"wfDefId": wf_def_id, "input": {"claimId": "C-1"}, **extra}
    return await client.call_tool("workflow_start", args)


async def test_start_runs_the_saved_head_and_wait_result_returns_its_output(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    wf_def_id = new_id()
    digest = await save_head(owner, wf_def_id, definition_yaml(marker=7))
    receipt = ok(await _start(caller, wf_def_id, expectedDefinitionDigest=digest))
    assert receipt["wfDefId"] == wf_def_id
    assert receipt["definitionDigest"] == digest
    assert receipt["state"] == "ACCEPTED"
    instance = {"workflowInstanceId": receipt["workflowInstanceId"]}
    done = ok(await caller.call_tool("workflow_wait_result", instance))
    assert done["state"] == "COMPLETED"
    assert done["output"]["marker"] == 7
    assert ok(await caller.call_tool("workflow_get_result", instance)) == done
    status = ok(await caller.call_tool("workflow_get_status", instance))
    assert status["state"] == "COMPLETED"
    assert status["result"]["marker"] == 7
    assert "finishedAt" in status


async def test_start_with_a_stale_head_digest_is_a_definition_mismatch(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml(marker=1))
    stale = await save_head(owner, new_id(), definition_yaml(marker=2))
    refused(
        await _start(caller, wf_def_id, expectedDefinitionDigest=stale),
        "WORKFLOW_DEFINITION_MISMATCH",
    )


async def test_start_reuses_the_run_for_a_body_key_and_starts_new_work_without_one(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    first = ok(await _start(caller, wf_def_id, idempotencyKey="nightly-2026-11-29"))
    again = ok(await _start(caller, wf_def_id, idempotencyKey="nightly-2026-11-29"))
    assert again["workflowInstanceId"] == first["workflowInstanceId"]
    refused(
        await caller.call_tool(
            "workflow_start",
            {"wfDefId": wf_def_id, "input": {"other": 1}, "idempotencyKey": "nightly-2026-11-29"},
        ),
        "WORKFLOW_IDEMPOTENCY_CONFLICT",
    )
    fresh = [ok(await _start(caller, wf_def_id))["workflowInstanceId"] for _ in range(2)]
    assert len({*fresh, first["workflowInstanceId"]}) == 3


async def test_start_refuses_a_caller_supplied_stable_tool_ref(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    refused(await _start(caller, wf_def_id, stableToolRef=new_id()), "WORKFLOW_INPUT_INVALID")


async def test_wait_result_returns_the_stored_error_of_a_failed_run_never_null(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml(extra_task=FAILING_TASK))
    receipt = ok(await _start(caller, wf_def_id))
    instance = {"workflowInstanceId": receipt["workflowInstanceId"]}
    failed = refused(
        await caller.call_tool("workflow_wait_result", instance), "WORKFLOW_TASK_FAILED"
    )
    assert failed["status"] == "failed"
    assert failed["workflowInstanceId"] == receipt["workflowInstanceId"]
    assert (
        refused(await caller.call_tool("workflow_get_result", instance), "WORKFLOW_TASK_FAILED")
        == failed
    )


async def test_lifecycle_tools_refuse_another_users_or_hosts_run_without_revealing_it(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    receipt = ok(await _start(caller, wf_def_id))
    instance = {"workflowInstanceId": receipt["workflowInstanceId"]}
    unknown = {"workflowInstanceId": new_id()}
    strangers = [
        client(http, dev_identity, "someone-else"),
        client(http, dev_identity, "caller-1", host_id=OTHER_HOST),
    ]
    for stranger in strangers:
        for tool in ("workflow_get_status", "workflow_get_result", "workflow_cancel"):
            theirs = refused(await stranger.call_tool(tool, instance), "WORKFLOW_NOT_FOUND")
            nothing = refused(await stranger.call_tool(tool, unknown), "WORKFLOW_NOT_FOUND")
            assert theirs["error"]["message"] == nothing["error"]["message"]
        refused(
            await stranger.call_tool("workflow_wait_result", {**instance, "waitMs": 0}),
            "WORKFLOW_NOT_FOUND",
        )
    still = ok(await caller.call_tool("workflow_get_status", instance))
    assert still["state"] == "ACCEPTED"


async def test_cancel_ends_a_run_before_effects_and_is_idempotent(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    receipt = ok(await _start(caller, wf_def_id))
    instance = {"workflowInstanceId": receipt["workflowInstanceId"]}
    first = ok(await caller.call_tool("workflow_cancel", {**instance, "reason": "not needed"}))
    assert first == {**instance, "result": "cancelled", "state": "CANCELLED"}
    again = ok(await caller.call_tool("workflow_cancel", instance))
    assert again["result"] == "alreadyTerminal"
    cancelled = refused(
        await caller.call_tool("workflow_wait_result", instance), "WORKFLOW_CANCELLED"
    )
    assert cancelled["status"] == "cancelled"


async def test_cancel_of_a_run_whose_policy_is_disabled_is_a_clear_refusal(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, cancellationPolicy="disabled")
    pending = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_TIMEOUT"
    )
    instance = {"workflowInstanceId": pending["workflowInstanceId"]}
    body = refused(await caller.call_tool("workflow_cancel", instance), "WORKFLOW_POLICY_DENIED")
    assert "disabled" in body["error"]["message"]
    status = ok(await caller.call_tool("workflow_get_status", instance))
    assert status["state"] == "ACCEPTED"
