"""Seed 000 Qualification Checklist, workflow_invoke items, against the live service.

Every call goes over HTTP to the service subprocess; runs execute there and call the local
backend. A test that needs a run in flight holds the run's request at the backend and
releases it when it has observed what it needs.
"""

from __future__ import annotations

import pytest

from tests.support.binding_builders import definition_yaml, new_id
from tests.support.invocation import FAILING_TASK, invoke_args, ok, refused, until_settled
from tests.support.live_stack import QualStack
from tests.support.live_tools import (
    REPLAYING,
    expire_windows,
    get_definition,
    invoke,
    post_definition,
    publish_live_tool,
    republish,
    republish_version,
    revoke,
    run_ended,
    runs_of,
)
from tests.support.mcp import McpTestClient
from tests.support.protected_backend import http_task
from tests.support.publication import versioned
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.requirement("000:Qualification Checklist"), pytest.mark.timeout(60)]


async def test_item_01_a_repeat_starts_a_new_run_at_window_zero_and_replays_in_a_positive_window(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """01: "A second identical sync call after completion starts a new run when resultReplayMs
    is 0, and replays within a positive window." """
    uri = qual_stack.unique_path("item01")
    fresh = await publish_live_tool(owner, get_definition(uri), (uri,))
    first = ok(await invoke(caller, fresh))
    second = ok(await invoke(caller, fresh))
    assert first["status"] == second["status"] == "completed"
    assert first["workflowInstanceId"] != second["workflowInstanceId"]
    assert len(qual_stack.backend.requests_to(uri)) == 2  # fresh data: the backend asked twice

    replaying = await publish_live_tool(
        owner, get_definition(uri), (uri,), idempotencyPolicy=REPLAYING
    )
    third = ok(await invoke(caller, replaying))
    replayed = ok(await invoke(caller, replaying))
    assert replayed == third
    assert len(qual_stack.backend.requests_to(uri)) == 3


async def test_item_02_a_retry_after_a_timeout_re_attaches_to_the_same_instance(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """02: "A retry after WORKFLOW_TIMEOUT re-attaches to the same instance." """
    uri = qual_stack.unique_path("item02")
    tool = await publish_live_tool(
        owner, get_definition(uri), (uri,), syncWaitMs=500, idempotencyPolicy=REPLAYING
    )
    qual_stack.backend.hold(uri)
    try:
        first = refused(await invoke(caller, tool), "WORKFLOW_TIMEOUT")
        assert first["status"] == "timeout"
        assert first["error"]["retryable"] is True
        again = refused(await invoke(caller, tool), "WORKFLOW_TIMEOUT")
        assert again["workflowInstanceId"] == first["workflowInstanceId"]
    finally:
        qual_stack.backend.release(uri)
    done = ok(await until_settled(lambda: invoke(caller, tool)))
    assert done["workflowInstanceId"] == first["workflowInstanceId"]
    assert await qual_stack.count(*runs_of(tool)) == 1
    assert len(qual_stack.backend.requests_to(uri)) == 1


async def test_item_03a_a_clean_failed_run_can_be_retried_at_once(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """03: "A clean FAILED run can be retried at once; ..." """
    uri = qual_stack.unique_path("item03a")
    text = get_definition(uri, then=FAILING_TASK)
    tool = await publish_live_tool(owner, text, (uri,), idempotencyPolicy=REPLAYING)
    first = refused(await invoke(caller, tool), "WORKFLOW_TASK_FAILED")
    assert first["error"]["afterEffect"] is False
    second = refused(await invoke(caller, tool), "WORKFLOW_TASK_FAILED")
    assert second["workflowInstanceId"] != first["workflowInstanceId"]
    assert await qual_stack.count(*runs_of(tool)) == 2


async def test_item_03b_a_failure_after_an_effect_replays_for_the_window(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """03: "... a failure after an effect replays for the window." """
    uri = qual_stack.unique_path("item03b")
    tool = await publish_live_tool(
        owner, post_definition(uri, then=FAILING_TASK), (uri,), write=True
    )
    failed = refused(await invoke(caller, tool), "WORKFLOW_TASK_FAILED")
    assert failed["error"]["afterEffect"] is True
    replayed = refused(await invoke(caller, tool), "WORKFLOW_TASK_FAILED")
    assert replayed == failed
    assert [seen.method for seen in qual_stack.backend.requests_to(uri)] == ["POST"]
    assert await qual_stack.count(*runs_of(tool)) == 1


async def test_item_04_a_run_past_its_deadline_is_cancelled_before_effects_and_reports_timeout(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """04: "A run past deadline_ts is cancelled before effects and reports WORKFLOW_TIMEOUT." """
    read, write = qual_stack.unique_path("item04-read"), qual_stack.unique_path("item04-write")
    held_read = http_task("fetch", "GET", read, authenticated=False, write=False)
    text = post_definition(write, before=held_read)
    tool = await publish_live_tool(
        owner, text, (read, write), write=True, syncWaitMs=500, totalDeadlineMs=1500
    )
    qual_stack.backend.hold(read)
    try:
        early = refused(await invoke(caller, tool), "WORKFLOW_TIMEOUT")
        assert early["error"]["retryable"] is True  # inside the deadline the run continues
        run = {"workflowInstanceId": early["workflowInstanceId"]}
        # Nobody re-attaches: the service itself ends the run at its deadline. (A retry that
        # landed after that would start new work: a clean run may be retried at once.)
        await wait_until(lambda: run_ended(caller, run), what="the run ended", within_s=30)
        status = ok(await caller.call_tool("workflow_get_status", run))
        late = refused(await caller.call_tool("workflow_wait_result", run), "WORKFLOW_TIMEOUT")
    finally:
        qual_stack.backend.release(read)
    # Whoever notices the deadline (the sweep, the worker, a caller re-attaching), the run is
    # cancelled with one stored end, and nothing after the deadline is dispatched.
    assert status["state"] == "CANCELLED"
    assert status["effectState"] == "none"
    stored = {
        "code": "WORKFLOW_TIMEOUT",
        "message": "the workflow deadline passed before the run finished",
        "retryable": False,
        "afterEffect": False,
    }
    assert status["error"] == stored
    assert late == {"status": "timeout", **run, "error": stored}
    assert qual_stack.backend.requests_to(write) == []


async def test_item_05_a_failed_task_returns_task_failed_with_its_stored_message_on_the_first_call(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """05: "A failed task returns WORKFLOW_TASK_FAILED with the stored message on the first
    call, not after the Gateway timeout." """
    uri = qual_stack.unique_path("item05")
    tool = await publish_live_tool(owner, get_definition(uri, then=FAILING_TASK), (uri,))
    result = await invoke(caller, tool)
    body = refused(result, "WORKFLOW_TASK_FAILED")
    assert body["status"] == "failed"
    assert body["error"]["message"] == "task /do/1/boom failed with a custom error (status 500)"
    assert result["content"][0]["text"] == f"WORKFLOW_TASK_FAILED: {body['error']['message']}"
    instance = {"workflowInstanceId": body["workflowInstanceId"]}
    status = ok(await caller.call_tool("workflow_get_status", instance))
    assert status["state"] == "FAILED"
    assert status["error"]["message"] == body["error"]["message"]


async def test_item_06_an_invoke_with_a_parent_action_is_refused_with_policy_denied(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """06: "A workflow_invoke with parentActionId is refused with WORKFLOW_POLICY_DENIED." """
    uri = qual_stack.unique_path("item06")
    tool = await publish_live_tool(owner, get_definition(uri), (uri,))
    body = refused(await invoke(caller, tool, parentActionId=new_id()), "WORKFLOW_POLICY_DENIED")
    assert "nested workflow-backed Tool calls" in body["error"]["message"]
    assert "workflowInstanceId" not in body
    assert await qual_stack.count(*runs_of(tool)) == 0
    assert qual_stack.backend.requests_to(uri) == []


async def test_item_07a_a_stale_binding_digest_gets_definition_mismatch(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """07 (Workflow half): "A Gateway snapshot with a stale bindingDigest gets
    WORKFLOW_DEFINITION_MISMATCH; ..." (the stale digest is the previous revision's)."""
    uri = qual_stack.unique_path("item07")
    text = get_definition(uri)
    tool = await publish_live_tool(owner, text, (uri,))
    renamed = await republish(owner, tool, (uri,), toolName="claims.summarize-v2")
    assert renamed["bindingDigest"] != tool.binding_digest
    body = refused(await invoke(caller, tool), "WORKFLOW_DEFINITION_MISMATCH")
    assert "workflowInstanceId" not in body
    assert await qual_stack.count(*runs_of(tool)) == 0
    current = invoke_args(tool, expectedBindingDigest=renamed["bindingDigest"])
    ok(await caller.call_tool("workflow_invoke", current))


async def test_item_13_an_expired_window_starts_a_new_run_a_nonterminal_run_is_never_re_accepted(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """13: "An expired idempotency window on a terminal run starts a new run; a nonterminal
    run is never re-accepted." """
    uri = qual_stack.unique_path("item13")
    tool = await publish_live_tool(
        owner, get_definition(uri), (uri,), syncWaitMs=500, idempotencyPolicy=REPLAYING
    )
    first = ok(await invoke(caller, tool, {"claimId": "C-13"}))
    assert ok(await invoke(caller, tool, {"claimId": "C-13"})) == first  # inside the window
    await expire_windows(qual_stack.database_url, first["workflowInstanceId"])
    second = ok(await invoke(caller, tool, {"claimId": "C-13"}))
    assert second["workflowInstanceId"] != first["workflowInstanceId"]

    qual_stack.backend.hold(uri)
    try:
        pending = refused(await invoke(caller, tool, {"claimId": "C-14"}), "WORKFLOW_TIMEOUT")
        await expire_windows(qual_stack.database_url, pending["workflowInstanceId"])
        again = refused(await invoke(caller, tool, {"claimId": "C-14"}), "WORKFLOW_TIMEOUT")
        assert again["workflowInstanceId"] == pending["workflowInstanceId"]
    finally:
        qual_stack.backend.release(uri)
    assert await qual_stack.count(*runs_of(tool)) == 3


@pytest.mark.parametrize("change", ["republish", "revoke"])
async def test_item_15_a_run_admitted_before_a_republish_and_revocation_finishes_pinned(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient, change: str
) -> None:
    """15: "A run admitted before a republish or revocation finishes with its pinned
    revision." """
    uri = qual_stack.unique_path(f"item15-{change}")
    tool = await publish_live_tool(
        owner, get_definition(uri), (uri,), syncWaitMs=500, idempotencyPolicy=REPLAYING
    )
    qual_stack.backend.hold(uri)
    try:
        pending = refused(await invoke(caller, tool), "WORKFLOW_TIMEOUT")
        if change == "republish":
            # Version 1.3.0 of the definition reaches nothing (no endpoint targets).
            newer_text = versioned(definition_yaml(marker=2), "1.3.0")
            await republish_version(owner, tool, newer_text, "1.3.0", syncWaitMs=500)
        else:
            # The very revision the run is pinned to.
            await revoke(owner, tool, "stop new calls")
    finally:
        qual_stack.backend.release(uri)
    waited = ok(
        await caller.call_tool(
            "workflow_wait_result", {"workflowInstanceId": pending["workflowInstanceId"]}
        )
    )
    assert waited["state"] == "COMPLETED"
    assert waited["definitionDigest"] == tool.definition_digest
    assert waited["output"]["path"].startswith(f"/item15-{change}/")  # the pinned target
    # New calls see the change; the admitted run did not.
    if change == "republish":
        refused(await invoke(caller, tool), "WORKFLOW_DEFINITION_MISMATCH")
    else:
        body = refused(await invoke(caller, tool), "WORKFLOW_POLICY_DENIED")
        assert body["error"]["message"] == "binding revoked by workflow owner"


async def test_item_24_a_revoked_revision_returns_policy_denied_on_the_next_call(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """24: "A revoked revision returns WORKFLOW_POLICY_DENIED on the next call." """
    uri = qual_stack.unique_path("item24")
    tool = await publish_live_tool(owner, get_definition(uri), (uri,))
    ok(await invoke(caller, tool))
    await revoke(owner, tool)
    body = refused(await invoke(caller, tool, {"claimId": "C-24"}), "WORKFLOW_POLICY_DENIED")
    assert body["error"]["message"] == "binding revoked by workflow owner"
    assert await qual_stack.count(*runs_of(tool)) == 1
