"""The queue side: claiming, lease renewal, reaping expired leases, finding late runs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import msgspec

from runtime.scheduler.models import (
    CancellationPolicy,
    ClaimedTask,
    EffectState,
    LeaseState,
    NewTask,
    SchedulerSettings,
)
from runtime.scheduler.store.sql import QUERIES, jsonb
from runtime.store import Connection


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
    cursor = await conn.execute(
        QUERIES["claim_tasks"],
        {
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
        },
    )
    return [claimed_from_row(row) for row in await cursor.fetchall()]


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
    cursor = await conn.execute(
        QUERIES["insert_claimed_task"],
        {
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
        },
    )
    row = await cursor.fetchone()
    return None if row is None else claimed_from_row(row)


def claimed_from_row(row: dict[str, Any]) -> tuple[ClaimedTask, LeaseState]:
    """The claimed task and its fresh lease a claiming statement returned."""
    task = ClaimedTask(
        host_id=str(row["host_id"]),
        task_id=str(row["task_id"]),
        process_id=str(row["process_id"]),
        step_no=row["step_no"],
        kind=row["kind"],
        payload=row["payload"],
        execution_class=row["execution_class"],
        idempotent=row["idempotent"],
        attempts=row["attempts"],
        deadline_ts=row["deadline_ts"],
        cancellation_policy=row["cancellation_policy"],
        sojourn_ms=float(row.get("sojourn_ms") or 0.0),
    )
    lease = LeaseState(
        host_id=task.host_id,
        task_id=task.task_id,
        process_id=task.process_id,
        step_no=task.step_no,
        lease_id=str(row["lease_id"]),
        fencing_token=row["fencing_token"],
        expires_ts=row["lease_expires_ts"],
    )
    return task, lease


async def renew_leases(
    conn: Connection, leases: list[LeaseState], lease_ms: int, overrun_ms: int
) -> dict[str, Renewal]:
    """Renew the given leases in one statement; a task missing from the result lost its lease."""
    if not leases:
        return {}
    cursor = await conn.execute(
        QUERIES["renew_leases"],
        {
            "host_ids": [lease.host_id for lease in leases],
            "task_ids": [lease.task_id for lease in leases],
            "lease_ids": [lease.lease_id for lease in leases],
            "fencing_tokens": [lease.fencing_token for lease in leases],
            "lease_ms": lease_ms,
            "overrun_ms": overrun_ms,
        },
    )
    return {
        str(row["task_id"]): Renewal(row["lease_expires_ts"], row["cancel_requested"])
        for row in await cursor.fetchall()
    }


async def reap_expired(conn: Connection, settings: SchedulerSettings) -> list[ExpiredLease]:
    """Lock expired leases, reclaim the useful ones; rows say reclaim, wait or timeout."""
    cursor = await conn.execute(
        QUERIES["reap_expired"],
        {
            "min_remaining_ms": settings.reclaim_min_remaining_ms,
            "stale_ms": settings.lease_ms,
            "overrun_ms": settings.overrun_ms,
            "limit": settings.reap_batch,
        },
    )
    return [msgspec.convert(row, ExpiredLease) for row in await cursor.fetchall()]


async def late_runs(conn: Connection, settings: SchedulerSettings) -> list[LateRun]:
    """Lock live runs past their deadline (a disabled policy's: past its hard ceiling)."""
    cursor = await conn.execute(
        QUERIES["sweep_deadlines"],
        {
            "stale_ms": settings.lease_ms,
            "limit": settings.reap_batch,
            "overrun_ms": settings.overrun_ms,
        },
    )
    return [msgspec.convert(row, LateRun) for row in await cursor.fetchall()]


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
    execution_class: str,
    deadline_ts: datetime,
    cancellation_policy: str,
    lease_id: str,
    fencing_token: int,
    lease_expires_ts: datetime,
) -> tuple[ClaimedTask, LeaseState]:
    """A run's first task as workflow_enqueue_run inserted it claimed (step 0, attempt 1)."""
    return claimed_from_row(
        {
            "host_id": host_id,
            "task_id": task_id,
            "process_id": process_id,
            "step_no": 0,
            "kind": kind,
            "payload": payload,
            "execution_class": execution_class,
            "idempotent": False,
            "attempts": 1,
            "deadline_ts": deadline_ts,
            "cancellation_policy": cancellation_policy,
            "lease_id": lease_id,
            "fencing_token": fencing_token,
            "lease_expires_ts": lease_expires_ts,
        }
    )
