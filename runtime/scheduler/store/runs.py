"""Runs and their tasks: insert, read, complete, fail, cancel."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from psycopg.types.json import Jsonb

from runtime.errors import WorkflowError
from runtime.scheduler.errors import LeaseLost, budget_exhausted, ending_state, error_document
from runtime.scheduler.models import (
    BudgetAmounts,
    CancellationPolicy,
    ClaimedTask,
    EffectState,
    ExecutionClass,
    LeaseState,
    NewTask,
    RunState,
    Successor,
    TaskOutcome,
)
from runtime.scheduler.store.queue import ClaimRow, claimed_from_row
from runtime.scheduler.store.sql import QUERIES, jsonb
from runtime.store import (
    Connection,
    fetch_built,
    fetch_one,
    fetch_one_built,
    fetch_one_built_then,
)
from runtime.store.batches import in_call_order


class ProcessRow(msgspec.Struct, frozen=True, kw_only=True):
    """One run with its budget counters (None: the run has no budget row)."""

    host_id: str
    process_id: str
    execution_class: ExecutionClass
    state: RunState
    deadline_ts: datetime
    cancellation_policy: CancellationPolicy
    effect_state: EffectState
    cancel_requested: bool
    result: Any
    error: dict[str, Any] | None
    binding_id: str | None
    created_ts: datetime
    updated_ts: datetime
    finished_ts: datetime | None
    remaining_attempts: int | None
    remaining_nested_calls: int | None
    remaining_request_bytes: int | None
    remaining_intermediate_bytes: int | None
    remaining_result_bytes: int | None
    remaining_cost_units: int | None


class CompletedTask(msgspec.Struct, frozen=True):
    """What the run of a task just marked done says about the next step."""

    past_deadline: bool
    cancellation_policy: CancellationPolicy
    effect_state: EffectState
    cancel_requested: bool
    # Ready work waits: the executor claims again at once only then.
    backlog: bool


class LockedRun(msgspec.Struct, frozen=True):
    """A run's row locked before deciding how to cancel it."""

    state: RunState
    effect_state: EffectState
    cancellation_policy: CancellationPolicy
    cancel_requested: bool
    deadline_ts: datetime
    past_deadline: bool


class RunInsert(msgspec.Struct, frozen=True, kw_only=True):
    """The parameters of insert_run but the budget: a run, then its first ready task."""

    host_id: str
    process_id: str
    execution_class: str
    deadline_ts: datetime
    cancellation_policy: str
    binding_id: str | None
    step_no: int
    kind: str
    payload: Jsonb | None
    priority: int
    available_at: datetime | None
    idempotent: bool


class TaskInsert(msgspec.Struct, frozen=True, kw_only=True):
    """The parameters of insert_task: a ready task of a live run."""

    host_id: str
    process_id: str
    step_no: int
    kind: str
    payload: Jsonb | None
    priority: int
    available_at: datetime | None
    idempotent: bool


class InsertedTask(msgspec.Struct, frozen=True):
    """The id of a task an insert statement added."""

    task_id: uuid.UUID


class EndedRun(msgspec.Struct, frozen=True):
    """A run a finishing or failing statement ended: its effect state."""

    effect_state: EffectState


class CompletionRow(msgspec.Struct, frozen=True, kw_only=True):
    """workflow_complete_task's answer: the outcome, then the claimed or ready next task."""

    outcome: str
    backlog: bool | None
    effect_state: EffectState | None
    host_id: uuid.UUID | None
    task_id: uuid.UUID | None
    process_id: uuid.UUID | None
    step_no: int | None
    kind: str | None
    payload: dict[str, Any] | None
    execution_class: ExecutionClass | None
    idempotent: bool | None
    attempts: int | None
    lease_id: uuid.UUID | None
    fencing_token: int | None
    lease_expires_ts: datetime | None
    deadline_ts: datetime | None
    cancellation_policy: CancellationPolicy | None


class CompletionBatchRow(CompletionRow, frozen=True, kw_only=True):
    """workflow_complete_task_batch's row: a completion's position in the batch, then its row."""

    ordinal: int


class CancelSignal(msgspec.Struct, frozen=True):
    """Whether a run asks to be cancelled, dispatched an effect, and is past its deadline."""

    cancel_requested: bool
    effect_state: EffectState
    past_deadline: bool


async def insert_run(
    conn: Connection,
    *,
    host_id: str,
    process_id: str,
    execution_class: str,
    deadline_ts: datetime,
    cancellation_policy: str,
    binding_id: str | None,
    budget: BudgetAmounts,
    first_task: NewTask,
    step_no: int,
) -> str:
    """Insert a run in ACCEPTED state, its budget row and first task (NOTIFY): one statement."""
    run = RunInsert(
        host_id=host_id,
        process_id=process_id,
        execution_class=execution_class,
        deadline_ts=deadline_ts,
        cancellation_policy=cancellation_policy,
        binding_id=binding_id,
        step_no=step_no,
        kind=first_task.kind,
        payload=jsonb(first_task.payload),
        priority=first_task.priority,
        available_at=first_task.available_at,
        idempotent=first_task.idempotent,
    )
    params = msgspec.structs.asdict(run) | budget.as_params()
    row = await fetch_one(conn, QUERIES["insert_run"], params, InsertedTask)
    assert row is not None  # the run was just inserted, so its task was too
    return str(row.task_id)


async def insert_task(
    conn: Connection, *, host_id: str, process_id: str, task: NewTask, step_no: int
) -> str | None:
    """Insert a ready task and NOTIFY; None when the run is no longer live."""
    insert = TaskInsert(
        host_id=host_id,
        process_id=process_id,
        step_no=step_no,
        kind=task.kind,
        payload=jsonb(task.payload),
        priority=task.priority,
        available_at=task.available_at,
        idempotent=task.idempotent,
    )
    params = msgspec.structs.asdict(insert)
    row = await fetch_one(conn, QUERIES["insert_task"], params, InsertedTask)
    return None if row is None else str(row.task_id)


async def fetch_process(conn: Connection, host_id: str, process_id: str) -> ProcessRow | None:
    """One run with its budget counters, or None."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, QUERIES["get_process"], params, ProcessRow)


async def complete_task(conn: Connection, lease: LeaseState, output: Any) -> CompletedTask:
    """Mark the leased task done; returns the run's deadline position. Raises LeaseLost."""
    params = lease.fence() | {"result": jsonb(output)}
    row = await fetch_one(conn, QUERIES["complete_task"], params, CompletedTask)
    if row is None:
        raise LeaseLost(lease.task_id, "complete")
    return row


class CompletedAtOnce(msgspec.Struct, frozen=True):
    """What workflow_complete_task did: ending (nothing written), finished, claimed, continued."""

    outcome: str
    backlog: bool
    # The run's effect state when this completion finished it (None: it had already ended).
    effect_state: EffectState | None
    claimed: tuple[ClaimedTask, LeaseState] | None
    # The next task left ready (outcome continued), as (task id, execution class): the caller
    # announces it once committed.
    ready: tuple[str, str] | None = None


async def complete_at_once(
    conn: Connection,
    lease: LeaseState,
    outcome: TaskOutcome,
    successor: Successor | None,
    *,
    announce_end: bool = False,
) -> CompletedAtOnce:
    """Complete the leased task in one autocommit statement (at most one next task).

    With announce_end, a task that finishes the run is followed, in the same round trip but in
    a transaction of its own, by the run-end NOTIFY for waiters in other processes (sent only
    when the run is over by then).

    Raises LeaseLost (nothing written: a repeat of a completion that committed lands here too)
    or WORKFLOW_BUDGET_EXHAUSTED (nothing written).
    """
    values = _completion_values(lease, outcome, successor)
    params = values | {name: jsonb(values[name]) for name in ("result", "run_result", "payload")}
    if announce_end and outcome.finish:
        run_key = {"host_id": lease.host_id, "process_id": lease.process_id}
        notify = (QUERIES["notify_run_end_if_over"], run_key)
        row = await fetch_one_built_then(
            conn, QUERIES["complete_task_at_once"], params, CompletionRow, notify
        )
    else:
        row = await fetch_one_built(conn, QUERIES["complete_task_at_once"], params, CompletionRow)
    assert row is not None  # the function returns exactly one row
    completed = _completed(row, lease, outcome)
    if isinstance(completed, BaseException):
        raise completed
    return completed


@dataclass(frozen=True)
class Completing:
    """One completion of a batch: what complete_at_once takes (never announcing the end)."""

    lease: LeaseState
    outcome: TaskOutcome
    successor: Successor | None


async def complete_completing(conn: Connection, done: Completing) -> CompletedAtOnce:
    """complete_at_once of one batchable completion, alone in its statement."""
    return await complete_at_once(conn, done.lease, done.outcome, done.successor)


async def complete_at_once_batch(
    conn: Connection, completions: Sequence[Completing]
) -> list[CompletedAtOnce | BaseException]:
    """Several completions in one autocommit statement (one transaction), each on its own.

    Each completion's answer, in order, is what complete_at_once returns or raises for it.
    """
    batch = json.dumps(
        [
            _completion_values(done.lease, done.outcome, done.successor)
            | {"process_id": done.lease.process_id}
            for done in completions
        ],
        default=_iso_instant,
    )
    rows = await fetch_built(
        conn, QUERIES["complete_task_batch"], {"calls": batch}, CompletionBatchRow
    )

    def answer(row: CompletionBatchRow) -> CompletedAtOnce | BaseException:
        done = completions[row.ordinal - 1]
        return _completed(row, done.lease, done.outcome)

    return in_call_order(len(completions), ((row.ordinal, answer(row)) for row in rows))


def _iso_instant(value: Any) -> str:
    # The one non-JSON value a completion's own parameters hold: a next task's available_at.
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _completion_values(
    lease: LeaseState, outcome: TaskOutcome, successor: Successor | None
) -> dict[str, Any]:
    """workflow_complete_task's parameters by name, the JSON ones as plain values."""
    task = outcome.next_tasks[0] if outcome.next_tasks else None
    amounts = outcome.consume or _NOTHING
    return (
        lease.fence()
        | amounts.as_params()
        | {
            "result": outcome.output,
            "consume": outcome.consume is not None,
            "finish": outcome.finish,
            "run_result": outcome.run_result,
            "next": task is not None,
            "step_no": None if task is None else _step_no(lease, task),
            "kind": None if task is None else task.kind,
            "payload": None if task is None else task.payload,
            "priority": None if task is None else task.priority,
            "available_at": None if task is None else task.available_at,
            "idempotent": None if task is None else task.idempotent,
            "worker_id": None if successor is None else successor.worker_id,
            "lease_ms": None if successor is None else successor.lease_ms,
            "overrun_ms": None if successor is None else successor.overrun_ms,
        }
    )


def _completed(
    row: CompletionRow | CompletionBatchRow, lease: LeaseState, outcome: TaskOutcome
) -> CompletedAtOnce | BaseException:
    """What one row of workflow_complete_task says, or the error its completion raises."""
    done = row.outcome
    if done == "lost":
        return LeaseLost(lease.task_id, "consume" if outcome.consume is not None else "complete")
    if done == "exhausted":
        return budget_exhausted()
    claimed = None
    if done == "claimed":
        # Every claim column is set on this outcome; the conversion checks that it is.
        claimed = claimed_from_row(msgspec.convert(row, ClaimRow, from_attributes=True))
    ready = None
    if done == "continued" and row.task_id is not None:
        ready = (str(row.task_id), str(row.execution_class))
    return CompletedAtOnce(done, bool(row.backlog), row.effect_state, claimed, ready)


def _step_no(lease: LeaseState, task: NewTask) -> int:
    return task.step_no if task.step_no is not None else lease.step_no + 1


_NOTHING = BudgetAmounts()


async def fail_task(
    conn: Connection, lease: LeaseState, error: WorkflowError, *, state: str = "failed"
) -> None:
    """Mark the leased task failed (or cancelled). Raises LeaseLost."""
    cursor = await conn.execute(
        QUERIES["fail_task"],
        lease.fence() | {"error": jsonb(error_document(error)), "state": state},
    )
    if await cursor.fetchone() is None:
        raise LeaseLost(lease.task_id, "fail")


async def release_task(conn: Connection, lease: LeaseState) -> bool:
    """Put the leased task back to ready (and NOTIFY); False when the lease was lost."""
    cursor = await conn.execute(QUERIES["release_task"], lease.fence())
    return await cursor.fetchone() is not None


async def finish_process(
    conn: Connection, host_id: str, process_id: str, result: Any
) -> EffectState | None:
    """Complete a live run; its effect state, or None when it was already terminal."""
    params = {"host_id": host_id, "process_id": process_id, "result": jsonb(result)}
    row = await fetch_one(conn, QUERIES["finish_process"], params, EndedRun)
    return None if row is None else row.effect_state


async def end_process(
    conn: Connection,
    host_id: str,
    process_id: str,
    error: WorkflowError,
) -> EffectState | None:
    """End a live run with error and cancel its open tasks; its effect state, None if ended.

    The state follows from the error (ending_state), so no path can store a deadline end or a
    cancel under another state than the others do.
    """
    params = {
        "host_id": host_id,
        "process_id": process_id,
        "state": ending_state(error),
        "error": jsonb(error_document(error)),
    }
    row = await fetch_one(conn, QUERIES["fail_process"], params, EndedRun)
    return None if row is None else row.effect_state


async def fail_process(
    conn: Connection,
    host_id: str,
    process_id: str,
    error: WorkflowError,
) -> bool:
    """End a live run with error and cancel its open tasks; False when already terminal."""
    return await end_process(conn, host_id, process_id, error) is not None


async def lock_process(conn: Connection, host_id: str, process_id: str) -> LockedRun | None:
    """Lock a run's open task rows, then its row, and read its cancellation facts, or None."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, QUERIES["lock_process"], params, LockedRun)


class _WholeLock(msgspec.Struct, frozen=True):
    whole: bool


async def lock_open_tasks_now(conn: Connection, host_id: str, process_id: str) -> bool:
    """Lock every open task row of a run without waiting; False when another holds one."""
    params = {"host_id": host_id, "process_id": process_id}
    row = await fetch_one(conn, QUERIES["lock_open_tasks_now"], params, _WholeLock)
    return row is not None and row.whole


async def select_cancel_signal(
    conn: Connection, host_id: str, process_id: str
) -> CancelSignal | None:
    """The run's cooperative cancellation flag, effect state and deadline position, or None."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, QUERIES["select_cancel_signal"], params, CancelSignal)


async def request_cancel(conn: Connection, host_id: str, process_id: str) -> bool:
    """Raise the cooperative cancellation signal; False when already raised or terminal."""
    cursor = await conn.execute(
        QUERIES["request_cancel"], {"host_id": host_id, "process_id": process_id}
    )
    row = await cursor.fetchone()
    return row is not None and row["signalled"] > 0
