"""The queue side: claiming, lease renewal, reaping expired leases, finding late runs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

import msgspec

from runtime.scheduler.models import (
    CancellationPolicy,
    ClaimedTask,
    EffectState,
    ExecutionClass,
    LeaseState,
    NewTask,
    SchedulerSettings,
)
from runtime.scheduler.store.sql import QUERIES, jsonb
from runtime.store import Connection, fetch_all, fetch_built, fetch_one_built


@dataclass(frozen=True)
class ClaimRequest:
    """Free capacity of one worker for one claim round."""

    worker_id: str
    interactive_slots: int
    standard_slots: int
    batch_slots: int
    borrow_slots: int

    @property
    def limit(self) -> int:
        """At most this many tasks can be claimed."""
        return self.interactive_slots + self.standard_slots + self.batch_slots + self.borrow_slots


class ClaimRow(msgspec.Struct, frozen=True, kw_only=True):
    """A claimed task and its fresh lease, as a claiming statement returns them."""

    host_id: uuid.UUID
    task_id: uuid.UUID
    process_id: uuid.UUID
    step_no: int
    kind: str
    payload: dict[str, Any]
    execution_class: ExecutionClass
    idempotent: bool
    attempts: int
    lease_id: uuid.UUID
    fencing_token: int
    lease_expires_ts: datetime
    deadline_ts: datetime
    cancellation_policy: CancellationPolicy
    # The queue wait in ms (claim_tasks only; numeric arrives as Decimal): None when not asked.
    sojourn_ms: Decimal | None = None


class RenewedLease(msgspec.Struct, frozen=True, kw_only=True):
    """A lease renew_leases extended: its new expiry and the run's cancellation signal."""

    task_id: uuid.UUID
    lease_expires_ts: datetime
    cancel_requested: bool


class ExpiredLease(msgspec.Struct, frozen=True, kw_only=True):
    """A task whose lease expired, and what the reaper decided for it."""

    host_id: uuid.UUID
    task_id: uuid.UUID
    process_id: uuid.UUID
    effect_state: EffectState
    # reclaim: ready again; wait: an effect may be in flight; else its run times out.
    decision: Literal["reclaim", "wait", "timeout"]
    notified: int


class LateRun(msgspec.Struct, frozen=True, kw_only=True):
    """A live run past its deadline (a disabled policy's: past its hard ceiling)."""

    host_id: uuid.UUID
    process_id: uuid.UUID
    cancellation_policy: CancellationPolicy
    effect_state: EffectState
    cancel_requested: bool
    has_live_task: bool


@dataclass(frozen=True)
class Renewal:
    """A renewed lease: its new expiry and whether the run asks for cancellation."""

    expires_ts: datetime
    cancel_requested: bool


async def claim_tasks(
    conn: Connection, request: ClaimRequest, settings: SchedulerSettings
) -> list[tuple[ClaimedTask, LeaseState]]:
    """Claim up to request.limit tasks in fair order, each under a fresh fenced lease."""
    if request.limit <= 0:
        return []
    params = {
        "worker_id": request.worker_id,
        "interactive_slots": request.interactive_slots,
        "standard_slots": request.standard_slots,
        "batch_slots": request.batch_slots,
        "borrow_slots": request.borrow_slots,
        "limit": request.limit,
        "tenant_limit": settings.tenant_limit,
        "aging_s": settings.aging_s,
        "lease_ms": settings.lease_ms,
        "overrun_ms": settings.overrun_ms,
    }
    rows = await fetch_built(conn, QUERIES["claim_tasks"], params, ClaimRow)
    return [claimed_from_row(row) for row in rows]


async def insert_claimed_task(
    conn: Connection,
    lease: LeaseState,
    task: NewTask,
    step_no: int,
    *,
    worker_id: str,
    lease_ms: int,
    overrun_ms: int,
) -> tuple[ClaimedTask, LeaseState] | None:
    """Insert the run's next task already claimed by worker_id; None when the run cannot go on."""
    params = {
        "host_id": lease.host_id,
        "process_id": lease.process_id,
        "step_no": step_no,
        "kind": task.kind,
        "payload": jsonb(task.payload),
        "priority": task.priority,
        "idempotent": task.idempotent,
        "worker_id": worker_id,
        "lease_ms": lease_ms,
        "overrun_ms": overrun_ms,
    }
    row = await fetch_one_built(conn, QUERIES["insert_claimed_task"], params, ClaimRow)
    return None if row is None else claimed_from_row(row)


def claimed_from_row(row: ClaimRow) -> tuple[ClaimedTask, LeaseState]:
    """The claimed task and its fresh lease a claiming statement returned."""
    task = ClaimedTask(
        host_id=str(row.host_id),
        task_id=str(row.task_id),
        process_id=str(row.process_id),
        step_no=row.step_no,
        kind=row.kind,
        payload=row.payload,
        execution_class=row.execution_class,
        idempotent=row.idempotent,
        attempts=row.attempts,
        deadline_ts=row.deadline_ts,
        cancellation_policy=row.cancellation_policy,
        sojourn_ms=float(row.sojourn_ms or 0.0),
    )
    lease = LeaseState(
        host_id=task.host_id,
        task_id=task.task_id,
        process_id=task.process_id,
        step_no=task.step_no,
        lease_id=str(row.lease_id),
        fencing_token=row.fencing_token,
        expires_ts=row.lease_expires_ts,
    )
    return task, lease


async def renew_leases(
    conn: Connection, leases: list[LeaseState], lease_ms: int, overrun_ms: int
) -> dict[str, Renewal]:
    """Renew the given leases in one statement; a task missing from the result lost its lease."""
    if not leases:
        return {}
    params = {
        "host_ids": [lease.host_id for lease in leases],
        "task_ids": [lease.task_id for lease in leases],
        "lease_ids": [lease.lease_id for lease in leases],
        "fencing_tokens": [lease.fencing_token for lease in leases],
        "lease_ms": lease_ms,
        "overrun_ms": overrun_ms,
    }
    rows = await fetch_built(conn, QUERIES["renew_leases"], params, RenewedLease)
    return {str(row.task_id): Renewal(row.lease_expires_ts, row.cancel_requested) for row in rows}


async def reap_expired(conn: Connection, settings: SchedulerSettings) -> list[ExpiredLease]:
    """Lock expired leases, reclaim the useful ones; rows say reclaim, wait or timeout."""
    params = {
        "min_remaining_ms": settings.reclaim_min_remaining_ms,
        "stale_ms": settings.lease_ms,
        "overrun_ms": settings.overrun_ms,
        "limit": settings.reap_batch,
    }
    return await fetch_all(conn, QUERIES["reap_expired"], params, ExpiredLease)


async def late_runs(conn: Connection, settings: SchedulerSettings) -> list[LateRun]:
    """Lock live runs past their deadline (a disabled policy's: past its hard ceiling)."""
    params = {
        "stale_ms": settings.lease_ms,
        "limit": settings.reap_batch,
        "overrun_ms": settings.overrun_ms,
    }
    return await fetch_all(conn, QUERIES["sweep_deadlines"], params, LateRun)


class NextAvailable(msgspec.Struct, frozen=True, kw_only=True):
    """Seconds until the earliest parked ready task becomes available (None: none is parked)."""

    seconds: float | None


async def next_available_in(conn: Connection) -> float | None:
    """Seconds until the earliest ready task not available yet becomes so, across every host."""
    row = await fetch_one_built(conn, QUERIES["next_available_in"], {}, NextAvailable)
    return None if row is None else row.seconds


async def notify_task_ready(conn: Connection, task_id: str) -> None:
    """NOTIFY the executors of every process that task_id is ready (autocommit connection)."""
    await conn.execute(QUERIES["notify_task_ready"], {"task_id": task_id})


async def notify_runs_ended(conn: Connection, process_ids: list[str]) -> None:
    """NOTIFY every process's waiters that these runs ended (autocommit connection)."""
    await conn.execute(QUERIES["notify_runs_ended"], {"process_ids": process_ids})


def claimed_first_task(
    *,
    host_id: str,
    process_id: str,
    task_id: str,
    kind: str,
    payload: dict[str, Any],
    execution_class: ExecutionClass,
    deadline_ts: datetime,
    cancellation_policy: CancellationPolicy,
    lease_id: str,
    fencing_token: int,
    lease_expires_ts: datetime,
) -> tuple[ClaimedTask, LeaseState]:
    """A run's first task as workflow_enqueue_run inserted it claimed (step 0, attempt 1)."""
    task = ClaimedTask(
        host_id=host_id,
        task_id=task_id,
        process_id=process_id,
        step_no=0,
        kind=kind,
        payload=payload,
        execution_class=execution_class,
        idempotent=False,
        attempts=1,
        deadline_ts=deadline_ts,
        cancellation_policy=cancellation_policy,
    )
    lease = LeaseState(
        host_id=host_id,
        task_id=task_id,
        process_id=process_id,
        step_no=0,
        lease_id=lease_id,
        fencing_token=fencing_token,
        expires_ts=lease_expires_ts,
    )
    return task, lease
