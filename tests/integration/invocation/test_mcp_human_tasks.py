"""Human tasks through POST /mcp: a start run parks on an ask; its assignee answers it."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from runtime.canonical import timestamp
from runtime.human_tasks import sample_open_tasks
from runtime.store import Database
from runtime.telemetry import metrics
from tests.support.human_tasks import (
    approval_yaml,
    input_ask_yaml,
    nested_asks_yaml,
    start_run,
    started_waiting,
)
from tests.support.invocation import CALLER, client, ok, refused
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("issue-22:human-tasks")


async def _open_tasks(who: McpTestClient, instance: str) -> list[dict[str, Any]]:
    listed = ok(await who.call_tool("workflow_task_list", {"workflowInstanceId": instance}))
    return list(listed["tasks"])


async def _state(caller: McpTestClient, instance: str) -> str:
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    return str(status["state"])


async def test_the_assignee_by_role_answers_and_the_run_completes_with_the_answer(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    stranger = client(http, dev_identity, "sam", roles=("clerk",))
    instance, task = await started_waiting(owner, caller, approver, approval_yaml())
    assert task["prompt"] == "Approve the claim?" and task["assignment"]["roleId"] == "approver"
    assert [o["value"] for o in task["options"]] == ["APPROVED", "REJECTED"]
    # Not an assignee: nothing listed, and the task is not found rather than forbidden.
    assert await _open_tasks(stranger, instance) == []
    refused(
        await stranger.call_tool("workflow_task_get", {"taskId": task["taskId"]}),
        "WORKFLOW_NOT_FOUND",
    )
    got = ok(await approver.call_tool("workflow_task_get", {"taskId": task["taskId"]}))
    assert got["task"]["workflowInstanceId"] == instance
    refused(
        await approver.call_tool(
            "workflow_task_complete",
            {"taskId": task["taskId"], "value": "MAYBE", "operationId": str(uuid.uuid4())},
        ),
        "WORKFLOW_INPUT_INVALID",
    )
    answer = {"taskId": task["taskId"], "value": "APPROVED", "operationId": str(uuid.uuid4())}
    started = time.monotonic()
    receipt = ok(await approver.call_tool("workflow_task_complete", answer))
    assert receipt["state"] == "answered" and receipt["value"] == "APPROVED"
    # An identical retry gets the same receipt; a different answer is a conflict.
    assert ok(await approver.call_tool("workflow_task_complete", answer)) == receipt
    other = {**answer, "value": "REJECTED", "operationId": str(uuid.uuid4())}
    refused(await approver.call_tool("workflow_task_complete", other), "WORKFLOW_STATE_CONFLICT")
    result = ok(await caller.call_tool("workflow_wait_result", {"workflowInstanceId": instance}))
    assert time.monotonic() - started < 5
    assert result["output"] == {"decision": "APPROVED", "by": "ann"}


async def test_a_timeout_applies_its_default_and_says_so(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance = await start_run(owner, caller, approval_yaml(timeout="PT2S"))

    async def opened() -> bool:
        return len(await _open_tasks(approver, instance)) == 1

    await wait_until(opened, what="the task open")

    async def finished() -> bool:
        return await _state(caller, instance) == "COMPLETED"

    await wait_until(finished, what="the run completed by its timeout", within_s=15)
    result = ok(await caller.call_tool("workflow_get_result", {"workflowInstanceId": instance}))
    assert result["output"] == {"decision": "REJECTED", "by": "timeout"}
    assert await _open_tasks(approver, instance) == []


async def test_a_waiting_run_names_its_open_tasks_and_cancelling_it_closes_them(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, task = await started_waiting(owner, caller, approver, approval_yaml())
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    assert status["state"] == "WAITING" and status["openTaskIds"] == [task["taskId"]]
    cancelled = ok(await caller.call_tool("workflow_cancel", {"workflowInstanceId": instance}))
    assert cancelled["result"] == "cancelled" and cancelled["state"] == "CANCELLED"
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    assert status["state"] == "CANCELLED" and "openTaskIds" not in status
    # The task left the inbox, is listed as cancelled, and a late answer is a conflict.
    assert await _open_tasks(approver, instance) == []
    listed = ok(
        await approver.call_tool(
            "workflow_task_list", {"workflowInstanceId": instance, "state": "cancelled"}
        )
    )
    assert [t["taskId"] for t in listed["tasks"]] == [task["taskId"]]
    answer = {"taskId": task["taskId"], "value": "APPROVED", "operationId": str(uuid.uuid4())}
    refused(await approver.call_tool("workflow_task_complete", answer), "WORKFLOW_STATE_CONFLICT")


async def test_a_start_run_takes_its_deadline_from_the_definition_up_to_thirty_days_by_default(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    cases = ((None, timedelta(days=30)), ("P10D", timedelta(days=10)), ("P40D", timedelta(days=30)))
    for timeout, expected in cases:
        # Without a `timeout` the deadline is seed 000's 30 days (no longer a day).
        text = approval_yaml()
        if timeout is not None:
            text = text.replace("do:\n", f"timeout:\n  after: {timeout}\ndo:\n", 1)
        instance = await start_run(owner, caller, text)
        status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
        deadline = datetime.fromisoformat(status["deadlineAt"])
        # Admission's clock and the row's created_ts differ by the transaction's milliseconds.
        span = deadline - datetime.fromisoformat(status["submittedAt"])
        assert abs(span - expected) < timedelta(seconds=5)


def _sample(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_metrics_count_open_tasks_answers_and_timeouts(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
    db: Database,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    answers = _sample("workflow_human_task_answer_seconds_count")
    defaults = _sample("workflow_human_task_timeouts_total", action="default")
    answered = await start_run(owner, caller, approval_yaml())
    timed = await start_run(owner, caller, approval_yaml(timeout="PT1S"))

    async def opened() -> bool:
        return len(await _open_tasks(approver, answered)) == 1

    await wait_until(opened, what="the task open")
    await sample_open_tasks(db)
    assert _sample("workflow_human_tasks_open") >= 1
    [task] = await _open_tasks(approver, answered)
    answer = {"taskId": task["taskId"], "value": "APPROVED", "operationId": str(uuid.uuid4())}
    ok(await approver.call_tool("workflow_task_complete", answer))
    assert _sample("workflow_human_task_answer_seconds_count") == answers + 1

    async def finished() -> bool:
        states = {await _state(caller, timed), await _state(caller, answered)}
        return states == {"COMPLETED"}

    await wait_until(finished, what="both runs completed", within_s=15)
    assert _sample("workflow_human_task_timeouts_total", action="default") == defaults + 1
    await sample_open_tasks(db)
    assert _sample("workflow_human_tasks_open") == 0


async def test_a_waiting_run_past_its_deadline_ends_and_closes_its_task(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    text = approval_yaml().replace("do:\n", "timeout:\n  after: PT2S\ndo:\n", 1)
    instance = await start_run(owner, caller, text)

    async def ended() -> bool:
        return await _state(caller, instance) in ("FAILED", "CANCELLED")

    await wait_until(ended, what="the run ended by its deadline", within_s=15)
    assert await _open_tasks(approver, instance) == []
    listed = ok(
        await approver.call_tool(
            "workflow_task_list", {"workflowInstanceId": instance, "state": "cancelled"}
        )
    )
    assert len(listed["tasks"]) == 1


async def test_a_start_run_is_readable_only_while_its_starter_holds_a_role_that_started_it(
    owner: McpTestClient, caller: McpTestClient, http: httpx.AsyncClient, dev_identity: Any
) -> None:
    instance = await start_run(owner, caller, approval_yaml())
    handle = {"workflowInstanceId": instance}
    # The same subject and client later: host-admin may call the lifecycle tools, but it is not
    # a role the start was authorized by (the caller started as admin and workflow-admin).
    demoted = client(http, dev_identity, CALLER, roles=("host-admin",))
    for tool in ("workflow_get_status", "workflow_get_result", "workflow_cancel"):
        refused(await demoted.call_tool(tool, handle), "WORKFLOW_NOT_FOUND")
    kept = client(http, dev_identity, CALLER, roles=("workflow-admin",))
    assert ok(await kept.call_tool("workflow_get_status", handle))["state"] == "ACCEPTED"


def _complete(task: dict[str, Any], **answer: Any) -> dict[str, Any]:
    return {"taskId": task["taskId"], "operationId": str(uuid.uuid4()), **answer}


async def test_an_optional_ask_is_answered_without_a_value_and_its_output_value_is_null(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    text = input_ask_yaml(required=False)
    instance, task = await started_waiting(owner, caller, approver, text)
    assert task["mode"] == "input" and task["required"] is False and task["options"] == []
    answer = _complete(task, comment="nothing to add")
    receipt = ok(await approver.call_tool("workflow_task_complete", answer))
    assert receipt["state"] == "answered" and "value" not in receipt
    assert ok(await approver.call_tool("workflow_task_complete", answer)) == receipt
    result = ok(await caller.call_tool("workflow_wait_result", {"workflowInstanceId": instance}))
    assert result["output"] == {"reply": None, "by": "ann"}


async def test_a_required_ask_refuses_a_missing_value_and_takes_free_text_up_to_its_bound(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    instance, task = await started_waiting(owner, caller, approver, input_ask_yaml())
    assert task["required"] is True
    body = refused(
        await approver.call_tool("workflow_task_complete", _complete(task)),
        "WORKFLOW_INPUT_INVALID",
    )
    assert "value is required" in body["error"]["message"]
    # Longer than the contract's 4096 characters: refused before anything is read.
    too_long = _complete(task, value="x" * 4097)
    refused(await approver.call_tool("workflow_task_complete", too_long), "WORKFLOW_INPUT_INVALID")
    # Nothing changed: the task is still open and the run still waits.
    assert [t["taskId"] for t in await _open_tasks(approver, instance)] == [task["taskId"]]
    assert await _state(caller, instance) == "WAITING"
    # An input ask has no options: any free text (line breaks, any script) is an answer.
    reply = "The courier lost it.\nÜberweisung folgt – 来週 " + "." * 4000
    ok(await approver.call_tool("workflow_task_complete", _complete(task, value=reply)))
    result = ok(await caller.call_tool("workflow_wait_result", {"workflowInstanceId": instance}))
    assert result["output"] == {"reply": reply, "by": "ann"}


async def test_an_assignee_computed_from_the_input_is_the_only_one_who_sees_and_answers(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
) -> None:
    rita = client(http, dev_identity, "rita", roles=("clerk",))
    # Another user, even one holding the role other asks go to, sees nothing of it.
    otto = client(http, dev_identity, "otto", roles=("approver", "clerk"))
    text = input_ask_yaml("userId: ${ workflow.input.reviewer }")
    instance, task = await started_waiting(owner, caller, rita, text, {"reviewer": "rita"})
    assert task["assignment"] == {"userId": "rita"}
    assert await _open_tasks(otto, instance) == []
    for tool, arguments in (
        ("workflow_task_get", {"taskId": task["taskId"]}),
        ("workflow_task_complete", _complete(task, value="mine now")),
    ):
        refused(await otto.call_tool(tool, arguments), "WORKFLOW_NOT_FOUND")
    got = ok(await rita.call_tool("workflow_task_get", {"taskId": task["taskId"]}))
    assert got["task"]["assignment"] == {"userId": "rita"}
    ok(await rita.call_tool("workflow_task_complete", _complete(task, value="late courier")))
    result = ok(await caller.call_tool("workflow_wait_result", {"workflowInstanceId": instance}))
    assert result["output"] == {"reply": "late courier", "by": "rita"}


async def test_an_assignee_computing_to_no_user_id_fails_the_run_when_the_task_opens(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
) -> None:
    text = input_ask_yaml("userId: ${ workflow.input.reviewer }")
    for reviewer in (42, ""):
        instance = await start_run(owner, caller, text, {"reviewer": reviewer})
        handle = {"workflowInstanceId": instance}
        failed = refused(
            await caller.call_tool("workflow_wait_result", handle), "WORKFLOW_TASK_FAILED"
        )
        message = failed["error"]["message"]
        assert "ask.assignment.userId must resolve to a non-empty string" in message
        assert "workflow.input.reviewer" in message
        status = ok(await caller.call_tool("workflow_get_status", handle))
        assert status["state"] == "FAILED" and "openTaskIds" not in status


async def test_an_ask_in_a_for_body_parks_per_iteration_and_resumes_where_it_stood(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    data = {"claims": ["c1", "c2"]}
    instance, first = await started_waiting(owner, caller, approver, nested_asks_yaml(), data)
    assert first["prompt"] == "Approve c1?" and first["taskName"] == "decide"
    ok(await approver.call_tool("workflow_task_complete", _complete(first, value="yes")))
    second: list[dict[str, Any]] = []

    async def asked_again() -> bool:
        second[:] = [t for t in await _open_tasks(approver, instance) if t != first]
        return await _state(caller, instance) == "WAITING" and len(second) == 1

    await wait_until(asked_again, what="the second iteration's ask open")
    assert second[0]["prompt"] == "Approve c2?" and second[0]["taskId"] != first["taskId"]
    ok(await approver.call_tool("workflow_task_complete", _complete(second[0], value="no")))
    result = ok(await caller.call_tool("workflow_wait_result", {"workflowInstanceId": instance}))
    # Each pass ran once: the replays up to each ask neither repeated the set nor the answer.
    assert result["output"] == {"seen": ["c1", "c2"], "answers": ["yes", "no"]}
    answered = {"workflowInstanceId": instance, "state": "answered"}
    listed = ok(await approver.call_tool("workflow_task_list", answered))["tasks"]
    assert [t["prompt"] for t in listed] == ["Approve c1?", "Approve c2?"]


async def test_a_receipt_has_the_one_timestamp_form_even_for_a_task_answered_before_it_did(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: Any,
    workers: Any,
    db: Database,
) -> None:
    approver = client(http, dev_identity, "ann", roles=("approver",))
    _, task = await started_waiting(owner, caller, approver, approval_yaml())
    answer = _complete(task, value="APPROVED")
    receipt = ok(await approver.call_tool("workflow_task_complete", answer))
    # runtime.canonical.timestamp's form (six fractional digits, Z), as createdAt has.
    assert receipt["answeredAt"] == timestamp(datetime.fromisoformat(receipt["answeredAt"]))
    assert task["createdAt"] == timestamp(datetime.fromisoformat(task["createdAt"]))
    # An answer stored before then kept three digits; the repeat's receipt still has six.
    async with db.transaction() as conn:
        await conn.execute(
            "UPDATE workflow_human_task"
            " SET output = jsonb_set(output, '{answeredAt}', to_jsonb(%s::text))"
            " WHERE task_id = %s",
            ("2026-12-01T10:00:00.250Z", task["taskId"]),
        )
    repeat = ok(await approver.call_tool("workflow_task_complete", answer))
    assert repeat == {**receipt, "answeredAt": "2026-12-01T10:00:00.250000Z"}
