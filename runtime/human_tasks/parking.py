"""A run's ask at run time: open its human task and park, or settle the answer to resume with.

How a run parks: the runner opens the ask's task (``park``) and ends its scheduler task with a
next task whose payload is ``parked_task_payload`` and whose available_at is the human task's
due time, or the point the run must stop: a ready task no lease holds, the claim's available_at
filter its timer. The scheduler's completion inserts that task, and the insert fires migration
0080's trigger ``workflow_task_park_on_human_task`` (BEFORE INSERT ON workflow_task, only for a
payload holding HUMAN_TASK_KEY; function ``workflow_park_on_human_task``). The trigger locks the
human task (FOR SHARE), then makes the parked task available now if the task was answered
between ``park`` and that insert, else turns the run WAITING in the same commit: no Python
writes WAITING. Its lock orders it with an answer (runtime.human_tasks.resume).

When that task is claimed, ``settle`` reads the human task: an answer (or a timeout that has
passed, recorded here under the row's lock so a late completion gets a conflict) is handed to
the interpreter; an open task not yet due parks the run again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runtime.canonical import timestamp
from runtime.engine.run import AskRequest
from runtime.human_tasks import resume, store
from runtime.scheduler.models import ClaimedTask
from runtime.store import Database
from runtime.telemetry import metrics

# The payload key naming the human task a parked task waits for: migration 0080's trigger fires
# on it, and wake_parked_task finds the parked task by it.
HUMAN_TASK_KEY = "humanTaskId"


async def settle(
    db: Database, task: ClaimedTask, position: int
) -> dict[str, dict[str, Any]] | None:
    """The answers of the asks the top-level task at position opened, by ask key ({output} or
    {failed}); None while the one it waits on is open and not yet due."""
    answers: dict[str, dict[str, Any]] = {}
    timeouts: list[str] = []
    async with db.transaction() as conn:
        rows = await store.select_tasks_at(conn, task.host_id, task.process_id, position)
        for row in rows:
            output = row.output
            if row.state == "open":
                if not row.due:
                    return None
                output = _timeout_output(row.question)
                await store.time_out_task(conn, task.host_id, row.task_id, output)
                timeouts.append("fail" if output is None else "default")
            elif row.state == "cancelled":
                continue
            answers[row.ask_key] = {"failed": True} if output is None else {"output": output}
        if rows:
            await resume.resume_waiting(conn, task.host_id, task.process_id)
    for action in timeouts:
        metrics.record_human_timeout(action)
    return answers


async def sample_open_tasks(db: Database) -> None:
    """Report how many human tasks are open (the workflow_human_tasks_open gauge)."""
    async with db.transaction(read_only=True) as conn:
        metrics.record_open_human_tasks(await store.count_open(conn))


async def park(
    db: Database, task: ClaimedTask, wf_def_id: str | None, request: AskRequest
) -> tuple[str, datetime | None]:
    """Open the ask's human task (once per ask); its id and due time."""
    assignment = request.assignment  # resolved when the ask opened
    new = store.NewHumanTask(
        host_id=task.host_id,
        process_id=task.process_id,
        position=request.position,
        ask_key=request.key,
        task_name=request.name,
        wf_def_id=wf_def_id,
        question=request.document(),
        assignee_user_id=assignment.get("userId"),
        assignee_role_id=assignment.get("roleId"),
        assignee_position_id=assignment.get("positionId"),
        timeout_ms=request.spec.timeout_ms,
    )
    async with db.transaction() as conn:
        await store.insert_task(conn, new)
        opened = await store.select_task_at(
            conn, task.host_id, task.process_id, request.position, request.key
        )
    assert opened is not None  # inserted or already there, in this transaction
    return opened.task_id, opened.due_ts


def parked_task_payload(state: dict[str, Any], human_task_id: str) -> dict[str, Any]:
    """The parked task's payload: the run's checkpoint and the human task it waits for."""
    # Inserting a task with this payload is what parks the run (the module docstring).
    return {"state": state, HUMAN_TASK_KEY: human_task_id}


def answer_output(
    question: dict[str, Any], value: Any, comment: str | None, answered_by: str
) -> dict[str, Any]:
    """The ask's output: {value, label?, comment?, answeredBy, answeredAt}."""
    output: dict[str, Any] = {"value": value}
    label = _label(question, value)
    if label is not None:
        output["label"] = label
    if comment is not None:
        output["comment"] = comment
    output["answeredBy"] = answered_by
    output["answeredAt"] = timestamp(datetime.now(UTC))
    return output


def _timeout_output(question: dict[str, Any]) -> dict[str, Any] | None:
    """A default answer that says it came from the timeout, or None (the ask fails)."""
    on_timeout = question.get("onTimeout") or {}
    if on_timeout.get("action") != "default":
        return None
    output = answer_output(question, on_timeout.get("default"), None, "timeout")
    output["timedOut"] = True
    return output


def _label(question: dict[str, Any], value: Any) -> str | None:
    for option in question.get("options") or []:
        if option.get("value") == value:
            label = option.get("label")
            return label if isinstance(label, str) else None
    return None
