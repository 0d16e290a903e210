"""The step ledger (effect state) and the budget ledger, both written under a fenced lease."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from runtime.errors import WorkflowError
from runtime.scheduler.errors import LeaseLost, budget_exhausted
from runtime.scheduler.models import BudgetAmounts, LeaseState, ReconcileOutcome, StepRecord
from runtime.scheduler.store.sql import QUERIES, jsonb
from runtime.store import Connection, fetch_one_built

# Each fenced ledger statement answers one row of counts: how many task rows the fence matched
# (owned: 0 means the lease was lost) and how many rows the write touched.


class EffectMarked(msgspec.Struct, frozen=True, kw_only=True):
    """What mark_effect_possible found: the fence held (owned), the run was live, the step was
    marked."""

    owned: int
    live: int
    marked: int


class EffectConfirmed(msgspec.Struct, frozen=True, kw_only=True):
    """What confirm_effect found: the fence held (owned), the step was confirmed."""

    owned: int
    confirmed: int


class BudgetDebited(msgspec.Struct, frozen=True, kw_only=True):
    """What debit_budget found: the fence held, every counter sufficed, the reservation's id."""

    owned: int
    debited: int
    reservation_id: uuid.UUID | None


class BudgetReconciled(msgspec.Struct, frozen=True, kw_only=True):
    """What reconcile_budget found: the fence held, settled now, and whether use overran."""

    owned: int
    settled: int
    overrun: bool


LedgerRowT = TypeVar("LedgerRowT", bound=msgspec.Struct)


async def get_step(
    conn: Connection, host_id: str, process_id: str, step_no: int
) -> StepRecord | None:
    """The step ledger row of (run, step), or None when no effect was ever dispatched."""
    params = {"host_id": host_id, "process_id": process_id, "step_no": step_no}
    return await fetch_one_built(conn, QUERIES["get_step"], params, StepRecord)


async def mark_effect_possible(
    conn: Connection,
    lease: LeaseState,
    step_no: int,
    *,
    takeover: bool = False,
    request_digest: str | None = None,
    compensation: Any = None,
) -> None:
    """Record the step's effect as possible before dispatch. Raises LeaseLost.

    request_digest fingerprints the call about to be sent, so a replay can tell whether the
    step it finds recorded is its own call.

    One statement locks the task row, then the live run row (the order a cancel takes them
    in), so a cancel and a first effect never both win, and a lease reclaimed while we waited
    marks nothing: the task row's fence is re-checked after the lock.
    """
    params = lease.fence() | {
        "process_id": lease.process_id,
        "step_no": step_no,
        "takeover": takeover,
        "request_digest": request_digest,
        # What its compensation needs (migration 0087), for a task that carries one.
        "compensation": None if compensation is None else jsonb(compensation),
    }
    row = await _one(conn, QUERIES["mark_effect_possible"], params, EffectMarked)
    if not row.owned:
        raise LeaseLost(lease.task_id, "mark_effect_possible")
    if not row.live:
        raise LeaseLost(lease.task_id, "mark_effect_possible: the run has ended")
    if not row.marked:
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
    params = lease.fence() | {"step_no": step_no, "output": jsonb(output)}
    row = await _one(conn, QUERIES["confirm_effect"], params, EffectConfirmed)
    if not row.owned:
        raise LeaseLost(lease.task_id, "confirm_effect")
    return bool(row.confirmed)


async def _debit_budget(
    conn: Connection, lease: LeaseState, amounts: BudgetAmounts, *, record: bool, what: str
) -> BudgetDebited:
    """Debit every counter at once or nothing (record: as a reservation). Raises LeaseLost or
    BUDGET_EXHAUSTED."""
    params = lease.fence() | amounts.as_params() | {"record": record}
    row = await _one(conn, QUERIES["debit_budget"], params, BudgetDebited)
    if not row.owned:
        raise LeaseLost(lease.task_id, what)
    if not row.debited:
        raise budget_exhausted()
    return row


async def reserve_budget(conn: Connection, lease: LeaseState, amounts: BudgetAmounts) -> str:
    """Debit every counter at once or nothing; the reservation id. Raises LeaseLost."""
    row = await _debit_budget(conn, lease, amounts, record=True, what="reserve")
    return str(row.reservation_id)


async def consume_budget(conn: Connection, lease: LeaseState, amounts: BudgetAmounts) -> None:
    """Debit what a task used, all counters or none. Raises LeaseLost or BUDGET_EXHAUSTED."""
    await _debit_budget(conn, lease, amounts, record=False, what="consume")


async def reconcile_budget(
    conn: Connection, lease: LeaseState, reservation_id: str, actual: BudgetAmounts
) -> ReconcileOutcome:
    """Settle a reservation once and credit back the unused part. Raises LeaseLost."""
    params = lease.fence() | actual.as_params()
    params |= {"reservation_id": reservation_id, "actual": jsonb(actual.as_params())}
    row = await _one(conn, QUERIES["reconcile_budget"], params, BudgetReconciled)
    if not row.owned:
        raise LeaseLost(lease.task_id, "reconcile")
    return ReconcileOutcome(settled=bool(row.settled), overrun=row.overrun)


async def _one(
    conn: Connection, query: str, params: Mapping[str, Any], row_type: type[LedgerRowT]
) -> LedgerRowT:
    row = await fetch_one_built(conn, query, params, row_type)
    if row is None:  # pragma: no cover - the statements always return one row
        raise RuntimeError("scheduler ledger statement returned no row")
    return row
