"""The step ledger (effect state) and the budget ledger, both written under a fenced lease."""

from __future__ import annotations

from typing import Any

from runtime.errors import WorkflowError
from runtime.scheduler.errors import LeaseLost, budget_exhausted
from runtime.scheduler.models import BudgetAmounts, LeaseState, ReconcileOutcome, StepRecord
from runtime.scheduler.store.sql import QUERIES, jsonb
from runtime.store import Connection


async def get_step(
    conn: Connection, host_id: str, process_id: str, step_no: int
) -> StepRecord | None:
    """The step ledger row of (run, step), or None when no effect was ever dispatched."""
    cursor = await conn.execute(
        QUERIES["get_step"], {"host_id": host_id, "process_id": process_id, "step_no": step_no}
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    return StepRecord(
        row["effect_state"], row["output"], row["fencing_token"], row["request_digest"]
    )


async def mark_effect_possible(
    conn: Connection,
    lease: LeaseState,
    step_no: int,
    *,
    takeover: bool = False,
    request_digest: str | None = None,
) -> None:
    """Record the step's effect as possible before dispatch. Raises LeaseLost.

    request_digest fingerprints the call about to be sent, so a replay can tell whether the
    step it finds recorded is its own call.

    Locks the live run row first, then the task row (the order a cancel takes them in), so a
    cancel and a first effect never both win, and a lease reclaimed while we waited marks
    nothing: the task row's fence is re-checked after the lock.
    """
    live = await conn.execute(
        QUERIES["lock_live_process"],
        {"host_id": lease.host_id, "process_id": lease.process_id},
    )
    if await live.fetchone() is None:
        raise LeaseLost(lease.task_id, "mark_effect_possible: the run has ended")
    cursor = await conn.execute(
        QUERIES["mark_effect_possible"],
        lease.fence()
        | {"step_no": step_no, "takeover": takeover, "request_digest": request_digest},
    )
    row = await _one(cursor)
    if not row["owned"]:
        raise LeaseLost(lease.task_id, "mark_effect_possible")
    if not row["marked"]:
        # The row is confirmed, or another claim left it possible: dispatching again could
        # repeat an effect that already happened.
        raise WorkflowError(
            "WORKFLOW_TASK_FAILED",
            f"step {step_no} may already have taken effect; it is not dispatched again",
            status="failed",
            after_effect=True,
        )


async def confirm_effect(conn: Connection, lease: LeaseState, step_no: int, output: Any) -> bool:
    """Record the step's effect as confirmed; False when it was not possible. Raises LeaseLost."""
    cursor = await conn.execute(
        QUERIES["confirm_effect"],
        lease.fence() | {"step_no": step_no, "output": jsonb(output)},
    )
    row = await _one(cursor)
    if not row["owned"]:
        raise LeaseLost(lease.task_id, "confirm_effect")
    return bool(row["confirmed"])


async def _debit_budget(
    conn: Connection, lease: LeaseState, amounts: BudgetAmounts, *, record: bool, what: str
) -> dict[str, Any]:
    """Debit every counter at once or nothing (record: as a reservation). Raises LeaseLost or
    BUDGET_EXHAUSTED."""
    params = lease.fence() | amounts.as_params() | {"record": record}
    row = await _one(await conn.execute(QUERIES["debit_budget"], params))
    if not row["owned"]:
        raise LeaseLost(lease.task_id, what)
    if not row["debited"]:
        raise budget_exhausted()
    return row


async def reserve_budget(conn: Connection, lease: LeaseState, amounts: BudgetAmounts) -> str:
    """Debit every counter at once or nothing; the reservation id. Raises LeaseLost."""
    row = await _debit_budget(conn, lease, amounts, record=True, what="reserve")
    return str(row["reservation_id"])


async def consume_budget(conn: Connection, lease: LeaseState, amounts: BudgetAmounts) -> None:
    """Debit what a task used, all counters or none. Raises LeaseLost or BUDGET_EXHAUSTED."""
    await _debit_budget(conn, lease, amounts, record=False, what="consume")


async def reconcile_budget(
    conn: Connection, lease: LeaseState, reservation_id: str, actual: BudgetAmounts
) -> ReconcileOutcome:
    """Settle a reservation once and credit back the unused part. Raises LeaseLost."""
    params = lease.fence() | actual.as_params()
    params |= {"reservation_id": reservation_id, "actual": jsonb(actual.as_params())}
    cursor = await conn.execute(QUERIES["reconcile_budget"], params)
    row = await _one(cursor)
    if not row["owned"]:
        raise LeaseLost(lease.task_id, "reconcile")
    return ReconcileOutcome(settled=bool(row["settled"]), overrun=bool(row["overrun"]))


async def _one(cursor: Any) -> dict[str, Any]:
    row = await cursor.fetchone()
    if row is None:  # pragma: no cover - the statements always return one row
        raise RuntimeError("scheduler ledger statement returned no row")
    return dict(row)
