"""One lock order for a run's rows: its task rows before its run row, on every path.

Claims, completions and answered asks hold a task row when they write the run row; a cancel
that held the run row while it cancelled the run's tasks waited on them in the other order,
and PostgreSQL ended one of the two as a deadlock's victim (a Lightspeed cancellation racing
its run's first claim, in CI). These tests hold a task row as those paths do and then take the
run row, while a cancel, a deadline sweep or an effect mark waits.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import pytest

from runtime.errors import WorkflowError
from runtime.scheduler import maintenance, service
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.models import NewTask, SchedulerSettings
from runtime.scheduler.store import queue
from runtime.store import Database
from tests.support.scheduler import enqueue, running
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("000:Waiting, timeout and re-attach")

T = TypeVar("T")
SETTINGS = SchedulerSettings()
CANCELLED = WorkflowError("WORKFLOW_CANCELLED", "cancelled by the test", status="cancelled")


async def _cancel(db: Database, host_id: str, process_id: str) -> str:
    """workflow_cancel's scheduler half, in its own transaction."""
    async with db.transaction() as conn:
        return await service.cancel_process(conn, host_id, process_id, CANCELLED)


async def _waits_on_a_lock(admin: psycopg.AsyncConnection[Any]) -> bool:
    cursor = await admin.execute(
        "SELECT count(*) AS waiting FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
        " WHERE NOT l.granted AND a.datname = current_database()"
    )
    row = await cursor.fetchone()
    return bool(row and row["waiting"])


async def _deadlocks(admin: psycopg.AsyncConnection[Any]) -> int:
    """Deadlocks PostgreSQL detected in this test's database so far."""
    await admin.execute("SELECT pg_stat_force_next_flush()")
    cursor = await admin.execute(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row["deadlocks"])


async def _hold_task_then_take_run(
    database_url: str, admin: psycopg.AsyncConnection[Any], task_id: str, process_id: str,
    waiter: Callable[[], Awaitable[T]],
) -> T:  # fmt: skip
    """Hold a task row as a claim or completion does, start waiter, then take the run row."""
    async with (
        await psycopg.AsyncConnection.connect(database_url) as holder,
        holder.transaction(),
    ):
        await holder.execute(
            "SELECT 1 FROM workflow_task WHERE task_id = %s FOR UPDATE", (task_id,)
        )
        waiting = asyncio.ensure_future(waiter())
        await wait_until(lambda: _waits_on_a_lock(admin), what="the other side waits")
        # Taken the other way round, the waiter holds the run row and this waits on it
        # while the waiter waits on the task row: the deadlock.
        await holder.execute("SET LOCAL lock_timeout = '5s'")
        await holder.execute(
            "UPDATE workflow_process SET updated_ts = now() WHERE process_id = %s",
            (process_id,),
        )
    return await asyncio.wait_for(waiting, timeout=30)


async def _ready_task(db: Database, host_id: str) -> tuple[str, str]:
    process_id = await enqueue(db, host_id=host_id, first_task=NewTask("echo", {}))
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT task_id::text FROM workflow_task WHERE process_id = %s", (process_id,)
        )
        row = await cursor.fetchone()
    assert row is not None
    return str(row["task_id"]), process_id


async def test_a_cancel_takes_the_run_tasks_before_the_run_row_as_a_claim_does(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id = str(uuid.uuid4())
    task_id, process_id = await _ready_task(db, host_id)
    before = await _deadlocks(admin)
    cancelled = await _hold_task_then_take_run(
        database_url, admin, task_id, process_id, lambda: _cancel(db, host_id, process_id)
    )
    assert cancelled == "cancelled"
    run = await service.get_process(db, host_id, process_id)
    assert run is not None and run.state == "CANCELLED"
    assert await _deadlocks(admin) == before


async def test_a_deadline_sweep_never_waits_on_a_task_row_another_transaction_holds(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id = str(uuid.uuid4())
    task_id, process_id = await _ready_task(db, host_id)
    await admin.execute(
        "UPDATE workflow_process SET deadline_ts = now() - interval '1 second'"
        " WHERE process_id = %s",
        (process_id,),
    )
    async with (
        await psycopg.AsyncConnection.connect(database_url) as holder,
        holder.transaction(),
    ):
        await holder.execute(
            "SELECT 1 FROM workflow_task WHERE task_id = %s FOR UPDATE", (task_id,)
        )
        # The sweep leaves the run for its next round rather than wait with the run row.
        report = await asyncio.wait_for(maintenance.sweep_deadlines_once(db, SETTINGS), timeout=30)
        assert report.timed_out == 0
        await holder.execute("SET LOCAL lock_timeout = '5s'")
        await holder.execute(
            "UPDATE workflow_process SET updated_ts = now() WHERE process_id = %s",
            (process_id,),
        )
    report = await maintenance.sweep_deadlines_once(db, SETTINGS)
    assert report.timed_out == 1


@pytest.mark.requirement("001:Idempotency And Side Effects")  # and the module's rule
async def test_an_effect_mark_takes_its_task_row_before_the_run_row(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id = str(uuid.uuid4())
    await enqueue(db, host_id=host_id, first_task=NewTask("write", {}))
    async with db.transaction() as conn:
        [(_, lease)] = await queue.claim_tasks(conn, queue.ClaimRequest("w1", 4, 0, 0, 0), SETTINGS)
    task_id, process_id = lease.task_id, lease.process_id
    await _hold_task_then_take_run(
        database_url, admin, task_id, process_id, lambda: service.mark_effect_possible(db, lease, 1)
    )
    confirmed = await _hold_task_then_take_run(
        database_url, admin, task_id, process_id,
        lambda: service.confirm_effect(db, lease, 1, {"ok": True}),
    )  # fmt: skip
    assert confirmed is True


async def test_a_mark_after_its_run_was_cancelled_loses_its_lease(
    db: Database, database_url: str
) -> None:
    host_id = str(uuid.uuid4())
    await enqueue(db, host_id=host_id, first_task=NewTask("write", {}))
    async with db.transaction() as conn:
        [(_, lease)] = await queue.claim_tasks(conn, queue.ClaimRequest("w1", 4, 0, 0, 0), SETTINGS)
    assert await _cancel(db, host_id, lease.process_id) == "cancelled"
    with pytest.raises(LeaseLost):
        await service.mark_effect_possible(db, lease, 1)


RACED_RUNS = 120


async def test_cancels_racing_claims_and_completions_never_deadlock(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    # Many runs cancelled while executors claim and complete them: every pair of orders is
    # raced, and PostgreSQL counts any deadlock it had to break.
    host_id = str(uuid.uuid4())
    before = await _deadlocks(admin)
    settings = SchedulerSettings(poll_interval_ms=50)
    outcomes: list[str] = []
    async with (
        running(db, database_url, settings=settings),
        running(db, database_url, settings=settings),
    ):
        for _ in range(RACED_RUNS // 10):
            batch = [
                await enqueue(db, host_id=host_id, first_task=NewTask("chain", {"remaining": 3}))
                for _ in range(10)
            ]
            outcomes += await asyncio.gather(*(_cancel(db, host_id, pid) for pid in batch))
    assert set(outcomes) <= {"cancelled", "alreadyTerminal"}
    assert await _deadlocks(admin) == before
