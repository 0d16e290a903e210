"""workflow_invoke idempotency: re-attach, replay windows, conflicts, deadlines, pinning."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, definition_yaml, new_id
from tests.support.execution import LocalServer, serving
from tests.support.invocation import (
    CALLER,
    FAILING_TASK,
    Tool,
    client,
    invoke_args,
    ok,
    publish_local_write_tool,
    publish_tool,
    refused,
    running_executor,
    until_settled,
)
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("000:Idempotency")


async def _invoke(client: McpTestClient, tool: Tool, **extra: Any) -> dict[str, Any]:
    return await client.call_tool("workflow_invoke", invoke_args(tool, **extra))


async def _instance(result: dict[str, Any]) -> str:
    return str(result["structuredContent"]["workflowInstanceId"])


async def test_with_a_zero_replay_window_a_second_identical_call_starts_a_new_run(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    tool = await publish_tool(owner)
    first = ok(await _invoke(caller, tool))
    second = ok(await _invoke(caller, tool))
    assert first["workflowInstanceId"] != second["workflowInstanceId"]


async def test_within_a_positive_replay_window_the_same_call_replays_the_result(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    tool = await publish_tool(
        owner, idempotencyPolicy={"kind": "derived", "resultReplayMs": 600000}
    )
    first = ok(await _invoke(caller, tool))
    second = ok(await _invoke(caller, tool))
    assert second == first
    different = ok(await _invoke(caller, tool, input={"claimId": "C-2"}))
    assert different["workflowInstanceId"] != first["workflowInstanceId"]


async def test_an_idempotency_key_sent_to_a_derived_key_tool_is_accepted_and_scopes_nothing(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    # Seed 000: idempotencyKey is "optional; required when the revision's key kind is explicit
    # or business"; for kind derived the key is the input digest Workflow computes.
    tool = await publish_tool(
        owner, idempotencyPolicy={"kind": "derived", "resultReplayMs": 600000}
    )
    first = ok(await _invoke(caller, tool, idempotencyKey="k-1"))
    second = ok(await _invoke(caller, tool, idempotencyKey="k-2"))
    assert second == first
    assert ok(await _invoke(caller, tool)) == first


async def test_a_retry_after_a_timeout_re_attaches_to_the_same_instance(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    # A replay window, so a run that completes between two polls of until_settled is
    # replayed to the next poll instead of a new run being started (window 0 would race).
    tool = await publish_tool(
        owner, syncWaitMs=100, idempotencyPolicy={"kind": "derived", "resultReplayMs": 600000}
    )
    first = refused(await _invoke(caller, tool), "WORKFLOW_TIMEOUT")
    assert first["status"] == "timeout"
    assert first["error"]["retryable"] is True
    again = refused(await _invoke(caller, tool), "WORKFLOW_TIMEOUT")
    assert again["workflowInstanceId"] == first["workflowInstanceId"]
    async with running_executor(services):
        done = ok(await until_settled(lambda: _invoke(caller, tool)))
    assert done["workflowInstanceId"] == first["workflowInstanceId"]
    assert await _count_runs(services) == 1


async def test_a_clean_failure_can_be_retried_at_once(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    text = definition_yaml(extra_task=FAILING_TASK)
    tool = await publish_tool(
        owner, text=text, idempotencyPolicy={"kind": "derived", "resultReplayMs": 600000}
    )
    first = refused(await _invoke(caller, tool), "WORKFLOW_TASK_FAILED")
    second = refused(await _invoke(caller, tool), "WORKFLOW_TASK_FAILED")
    assert second["workflowInstanceId"] != first["workflowInstanceId"]


async def test_a_failure_after_an_effect_replays_for_the_window(
    owner: McpTestClient, caller: McpTestClient, services: Services, workers: object
) -> None:
    async with serving(LocalServer()) as backend:
        tool = await publish_local_write_tool(owner, services, backend.base, then=FAILING_TASK)
        failed = refused(await until_settled(lambda: _invoke(caller, tool)), "WORKFLOW_TASK_FAILED")
        replayed = refused(await _invoke(caller, tool), "WORKFLOW_TASK_FAILED")
    # The write reached the backend once; the failure after it is replayed, never re-run.
    assert failed["error"]["afterEffect"] is True and failed["error"]["retryable"] is False
    assert replayed == failed
    assert [request["path"] for request in backend.requests] == ["/claims"]
    assert await _count_runs(services) == 1


async def test_an_expired_window_on_a_terminal_run_starts_a_new_run(
    owner: McpTestClient, caller: McpTestClient, services: Services, workers: object
) -> None:
    tool = await publish_tool(
        owner, idempotencyPolicy={"kind": "derived", "resultReplayMs": 600000}
    )
    first = ok(await _invoke(caller, tool))
    await _expire_windows(services)
    second = ok(await _invoke(caller, tool))
    assert second["workflowInstanceId"] != first["workflowInstanceId"]


async def test_a_nonterminal_run_is_never_re_accepted_even_after_its_window(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    tool = await publish_tool(owner, syncWaitMs=100)
    first = refused(await _invoke(caller, tool), "WORKFLOW_TIMEOUT")
    await _expire_windows(services)
    second = refused(await _invoke(caller, tool), "WORKFLOW_TIMEOUT")
    assert second["workflowInstanceId"] == first["workflowInstanceId"]
    assert await _count_runs(services) == 1


async def test_an_explicit_key_with_another_input_or_client_conflicts_while_active(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
) -> None:
    tool = await publish_tool(
        owner, syncWaitMs=100, idempotencyPolicy={"kind": "explicit", "resultReplayMs": 600000}
    )
    first = refused(await _invoke(caller, tool, idempotencyKey="order-1"), "WORKFLOW_TIMEOUT")
    other_input = invoke_args(tool, {"claimId": "C-9"}, idempotencyKey="order-1")
    refused(await caller.call_tool("workflow_invoke", other_input), "WORKFLOW_IDEMPOTENCY_CONFLICT")
    via_agent = client(http, dev_identity, CALLER, user_client_id="agent")
    refused(
        await _invoke(via_agent, tool, idempotencyKey="order-1"), "WORKFLOW_IDEMPOTENCY_CONFLICT"
    )
    other_key = refused(await _invoke(caller, tool, idempotencyKey="order-2"), "WORKFLOW_TIMEOUT")
    assert other_key["workflowInstanceId"] != first["workflowInstanceId"]


async def test_a_run_past_its_deadline_is_cancelled_before_effects_and_reports_timeout(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    tool = await publish_tool(owner, syncWaitMs=300, totalDeadlineMs=300)
    body = refused(await _invoke(caller, tool), "WORKFLOW_TIMEOUT")
    instance = body["workflowInstanceId"]
    for _ in range(3):
        if body["error"]["retryable"] is False:
            break
        # Still inside the deadline: the retry re-attaches and waits out the rest.
        body = refused(await _invoke(caller, tool), "WORKFLOW_TIMEOUT")
        assert body["workflowInstanceId"] == instance
    assert body["error"]["retryable"] is False
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    assert status["state"] == "CANCELLED"
    assert status["effectState"] == "none"
    assert status["error"]["code"] == "WORKFLOW_TIMEOUT"


async def test_a_run_admitted_before_a_republish_or_revocation_finishes_with_its_revision(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    tool = await publish_tool(owner, syncWaitMs=100)
    pending = refused(await _invoke(caller, tool), "WORKFLOW_TIMEOUT")
    newer = await publish_tool(
        owner,
        text=definition_yaml(marker=2),
        tool_id=tool.tool_id,
        wf_def_id=tool.wf_def_id,
        version="1.3.0",
        expected_version=tool.aggregate_version,
        syncWaitMs=100,
    )
    revoke = {
        "hostId": HOST,
        "bindingId": newer.binding_id,
        "expectedBindingDigest": newer.binding_digest,
        "comment": "stop new calls",
        "operationId": new_id(),
    }
    ok(await owner.call_tool("workflow_binding_revoke", revoke))
    async with running_executor(services):
        waited = ok(
            await caller.call_tool(
                "workflow_wait_result", {"workflowInstanceId": pending["workflowInstanceId"]}
            )
        )
    assert waited["state"] == "COMPLETED"
    assert waited["output"]["marker"] == 1
    assert waited["definitionDigest"] == tool.definition_digest
    refused(await _invoke(caller, newer), "WORKFLOW_POLICY_DENIED")


async def _expire_windows(services: Services) -> None:
    # Moves every reservation's windows into the past (what waiting out the window does).
    async with services.database.transaction() as conn:
        await conn.execute(
            "UPDATE workflow_idempotency_t SET in_flight_until = now() - interval '1 second',"
            " result_replay_until = now() - interval '1 second'"
        )


async def _count_runs(services: Services) -> int:
    async with services.database.transaction() as conn:
        cursor = await conn.execute("SELECT count(*) AS n FROM workflow_process")
        row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])
