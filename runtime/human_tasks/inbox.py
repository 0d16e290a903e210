"""The human-task inbox: an assignee lists, reads and answers the tasks of parked runs.

An assignee is matched on the verified token only (user id, roles, positions) and on its host;
a task of anyone else is not found, the same refusal as an unknown id. An answer resumes the
run at once: its parked task is made available in the answering transaction and announced
after the commit.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec

from generated.models import (
    HumanTask,
    WorkflowTaskCompleteInput,
    WorkflowTaskCompleteOutput,
    WorkflowTaskGetOutput,
    WorkflowTaskListInput,
    WorkflowTaskListOutput,
)
from runtime.canonical import timestamp
from runtime.errors import WorkflowError
from runtime.human_tasks import store as tasks
from runtime.human_tasks.parking import answer_output
from runtime.human_tasks.resume import announce_woken, wake_parked
from runtime.human_tasks.store import AssignedTask, Assignee
from runtime.security import InvocationContext
from runtime.store import Database
from runtime.telemetry import metrics


def _assignee(ctx: InvocationContext) -> Assignee:
    return Assignee(ctx.user_id, sorted(ctx.roles), sorted(ctx.positions))


def _not_found() -> WorkflowError:
    return WorkflowError(
        "WORKFLOW_NOT_FOUND", "no human task with this id is assigned to the caller"
    )


def _task_id(text: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise _not_found() from None


async def list_tasks(
    db: Database, ctx: InvocationContext, args: WorkflowTaskListInput
) -> WorkflowTaskListOutput:
    """workflow_task_list: the caller's tasks in one state (default open), oldest first."""
    state = args.state if isinstance(args.state, str) else "open"
    limit = args.limit if isinstance(args.limit, int) else 50
    after = _decode_cursor(args.cursor) if isinstance(args.cursor, str) else None
    run = args.workflow_instance_id if isinstance(args.workflow_instance_id, str) else None
    async with db.transaction(read_only=True) as conn:
        rows = await tasks.list_assigned(
            conn, ctx.host_id, _assignee(ctx), state=state, process_id=run,
            after=after, limit=limit + 1,
        )  # fmt: skip
    page = rows[:limit]
    output = WorkflowTaskListOutput(tasks=[_document(row) for row in page])
    if len(rows) > limit:
        output.next_cursor = _encode_cursor(page[-1])
    return output


async def get_task(db: Database, ctx: InvocationContext, task_id: str) -> WorkflowTaskGetOutput:
    """workflow_task_get: one task the caller is an assignee of."""
    # Not read-only: the assignee query locks the row (the one query completion uses too).
    async with db.transaction() as conn:
        row = await tasks.select_assigned(conn, ctx.host_id, _task_id(task_id), _assignee(ctx))
    if row is None:
        raise _not_found()
    return WorkflowTaskGetOutput(task=_document(row))


async def complete_task(
    db: Database, ctx: InvocationContext, args: WorkflowTaskCompleteInput
) -> WorkflowTaskCompleteOutput:
    """workflow_task_complete: answer an open task; the same answer again gets its receipt."""
    task_id = _task_id(args.task_id)
    comment = args.comment if isinstance(args.comment, str) else None
    value = args.value if isinstance(args.value, str) else None
    digest = _answer_digest(value, comment, ctx.user_id)
    async with db.transaction() as conn:
        # Locked: migration 0080's park trigger waits for this answer or this for its insert.
        row = await tasks.select_assigned(conn, ctx.host_id, task_id, _assignee(ctx))
        if row is None:
            raise _not_found()
        # Closed: answered, timed out at a claim (parking.settle), or cancelled by its run's
        # end (migration 0081's trigger).
        if row.state != "open":
            return _receipt_of_repeat(row, args.operation_id, digest)
        _check_value(row.question, value)
        output = answer_output(row.question, value, comment, ctx.user_id)
        answer = tasks.TaskAnswer(
            output=output,
            answered_by=ctx.user_id,
            operation_id=args.operation_id,
            answer_digest=digest,
        )
        await tasks.answer_task(conn, ctx.host_id, task_id, answer)
        woken = await wake_parked(conn, ctx.host_id, row.process_id, task_id)
    announce_woken(db, woken)
    metrics.observe_human_answer((datetime.now(UTC) - row.created_ts).total_seconds())
    return _receipt(row, "answered", output)


def _receipt_of_repeat(
    row: AssignedTask, operation_id: str, digest: str
) -> WorkflowTaskCompleteOutput:
    if row.state == "answered" and row.operation_id == operation_id and row.answer_digest == digest:
        return _receipt(row, "answered", row.output)
    raise WorkflowError("WORKFLOW_STATE_CONFLICT", f"the task is already closed ({row.state})")


def _receipt(row: AssignedTask, state: str, output: dict[str, Any]) -> WorkflowTaskCompleteOutput:
    receipt = {
        "taskId": row.task_id,
        "workflowInstanceId": row.process_id,
        "state": state,
        # Written again: an answer stored before answers took this form has three digits.
        "answeredAt": timestamp(datetime.fromisoformat(output["answeredAt"])),
    }
    if output.get("value") is not None:  # an optional task answered without a value has none
        receipt["value"] = output["value"]
    return msgspec.convert(receipt, WorkflowTaskCompleteOutput)


def _check_value(question: dict[str, Any], value: str | None) -> None:
    if value is None:
        # Only an ask with `required: false` may be answered without a value.
        if question.get("required", True):
            raise WorkflowError(
                "WORKFLOW_INPUT_INVALID", "value is required: this task must be answered"
            )
        return
    values = [option["value"] for option in question.get("options") or []]
    if values and value not in values:
        raise WorkflowError(
            "WORKFLOW_INPUT_INVALID",
            f"value must be one of the task's options: {', '.join(values)}",
        )


def _answer_digest(value: str | None, comment: str | None, user_id: str) -> str:
    text = json.dumps([value, comment, user_id], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _document(row: AssignedTask) -> HumanTask:
    question = row.question
    document: dict[str, Any] = {
        "taskId": row.task_id,
        "workflowInstanceId": row.process_id,
        "taskName": row.task_name,
        "state": row.state,
        "prompt": question["prompt"],
        "mode": question["mode"],
        "assignment": question["assignment"],
        "options": question["options"],
        "required": question["required"],
        "createdAt": timestamp(row.created_ts),
    }
    if row.wf_def_id is not None:
        document["wfDefId"] = row.wf_def_id
    if row.due_ts is not None:
        document["dueAt"] = timestamp(row.due_ts)
    return msgspec.convert(document, HumanTask)


def _encode_cursor(row: AssignedTask) -> str:
    text = f"{row.created_ts.isoformat()}|{row.task_id}"
    return base64.urlsafe_b64encode(text.encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created, task_id = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        return datetime.fromisoformat(created).astimezone(UTC), str(uuid.UUID(task_id))
    except (ValueError, UnicodeDecodeError):
        raise WorkflowError(
            "WORKFLOW_INPUT_INVALID", "cursor is not a cursor of this list"
        ) from None
