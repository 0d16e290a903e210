"""Runs and their tasks: insert, read, complete, fail, cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runtime.errors import WorkflowError
from runtime.scheduler.errors import LeaseLost, ending_state, error_document
from runtime.scheduler.models import BudgetAmounts, EffectState, LeaseState, NewTask
from runtime.scheduler.store.sql import QUERIES, jsonb
from runtime.store import Connection


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
    params: dict[str, Any] = {
        "host_id": host_id,
        "process_id": process_id,
        "execution_class": execution_class,
        "deadline_ts": deadline_ts,
        "cancellation_policy": cancellation_policy,
        "binding_id": binding_id,
        "step_no": step_no,
        "kind": first_task.kind,
        "payload": jsonb(first_task.payload),
        "priority": first_task.priority,
        "available_at": first_task.available_at,
        "idempotent": first_task.idempotent,
    }
    cursor = await conn.execute(QUERIES["insert_run"], params | budget.as_params())
    row = await cursor.fetchone()
    assert row is not None  # the run was just inserted, so its task was too
    return str(row["task_id"])


async def insert_task(
    conn: Connection, *, host_id: str, process_id: str, task: NewTask, step_no: int
) -> str | None:
    """Insert a ready task and NOTIFY; None when the run is no longer live."""
    cursor = await conn.execute(
        QUERIES["insert_task"],
        {
            "host_id": host_id,
            "process_id": process_id,
            "step_no": step_no,
            "kind": task.kind,
            "payload": jsonb(task.payload),
            "priority": task.priority,
            "available_at": task.available_at,
            "idempotent": task.idempotent,
        },
    )
    row = await cursor.fetchone()
    return None if row is None else str(row["task_id"])


async def fetch_process(conn: Connection, host_id: str, process_id: str) -> dict[str, Any] | None:
    """One run with its budget counters, or None."""
    cursor = await conn.execute(
        QUERIES["get_process"], {"host_id": host_id, "process_id": process_id}
    )
    row = await cursor.fetchone()
    return None if row is None else dict(row)


async def complete_task(conn: Connection, lease: LeaseState, output: Any) -> dict[str, Any]:
    """Mark the leased task done; returns the run's deadline position. Raises LeaseLost."""
    cursor = await conn.execute(QUERIES["complete_task"], lease.fence() | {"result": jsonb(output)})
    row = await cursor.fetchone()
    if row is None:
        raise LeaseLost(lease.task_id, "complete")
    return dict(row)


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
    cursor = await conn.execute(
        QUERIES["finish_process"],
        {"host_id": host_id, "process_id": process_id, "result": jsonb(result)},
    )
    row = await cursor.fetchone()
    return None if row is None else row["effect_state"]


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
    cursor = await conn.execute(
        QUERIES["fail_process"],
        {
            "host_id": host_id,
            "process_id": process_id,
            "state": ending_state(error),
            "error": jsonb(error_document(error)),
        },
    )
    row = await cursor.fetchone()
    return None if row is None else row["effect_state"]


async def fail_process(
    conn: Connection,
    host_id: str,
    process_id: str,
    error: WorkflowError,
) -> bool:
    """End a live run with error and cancel its open tasks; False when already terminal."""
    return await end_process(conn, host_id, process_id, error) is not None


async def lock_process(conn: Connection, host_id: str, process_id: str) -> dict[str, Any] | None:
    """Lock a run's row FOR UPDATE and read its cancellation facts, or None."""
    cursor = await conn.execute(
        QUERIES["lock_process"], {"host_id": host_id, "process_id": process_id}
    )
    row = await cursor.fetchone()
    return None if row is None else dict(row)


async def select_cancel_signal(
    conn: Connection, host_id: str, process_id: str
) -> dict[str, Any] | None:
    """The run's cooperative cancellation flag, effect state and deadline position, or None."""
    cursor = await conn.execute(
        QUERIES["select_cancel_signal"], {"host_id": host_id, "process_id": process_id}
    )
    row = await cursor.fetchone()
    return None if row is None else dict(row)


async def request_cancel(conn: Connection, host_id: str, process_id: str) -> bool:
    """Raise the cooperative cancellation signal; False when already raised or terminal."""
    cursor = await conn.execute(
        QUERIES["request_cancel"], {"host_id": host_id, "process_id": process_id}
    )
    return cursor.rowcount > 0
