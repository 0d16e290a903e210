"""Cooperative cancellation in the scheduler: a signalled run schedules nothing more."""

from __future__ import annotations

import asyncio
import logging

import pytest

from runtime.scheduler.lease import TaskLease
from runtime.scheduler.models import ClaimedTask, SchedulerSettings, TaskOutcome
from runtime.scheduler.store import runs
from runtime.store import Database
from tests.support.scheduler import (
    cancel_signalled,
    gated,
    running,
    start,
    wait_terminal,
)
from tests.support.waiting import wait_until

SWEEPING = SchedulerSettings(poll_interval_ms=60_000, sweep_interval_ms=50)


async def _task_kinds(db: Database, process_id: str) -> list[str]:
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT kind FROM workflow_task WHERE process_id = %s ORDER BY step_no", (process_id,)
        )
        return [row["kind"] for row in await cursor.fetchall()]


async def test_a_cooperative_run_signalled_during_a_step_ends_cancelled_without_its_next_task(
    db: Database, database_url: str
) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    handlers = {"gated": gated(gate, started, write=True)}
    async with running(db, database_url, handlers):
        host_id, process_id = await start(db, "gated", cancellation_policy="cooperative")
        async with asyncio.timeout(10):
            await started.wait()
        async with db.transaction() as conn:
            assert await runs.request_cancel(conn, host_id, process_id)
        gate.set()
        run = await wait_terminal(database_url, db, host_id, process_id)
    assert run.state == "CANCELLED"
    assert run.error["code"] == "WORKFLOW_CANCELLED"
    assert run.error["afterEffect"] is True
    assert await _task_kinds(db, process_id) == ["gated"]


async def test_the_deadline_sweep_stops_a_cooperative_run_before_its_next_task(
    db: Database, database_url: str
) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    handlers = {"gated": gated(gate, started, write=True)}
    async with running(db, database_url, handlers, SWEEPING):
        host_id, process_id = await start(
            db, "gated", cancellation_policy="cooperative", timeout_ms=300
        )
        async with asyncio.timeout(10):
            await started.wait()
        # The sweep raises the signal once the deadline passed (the effect keeps it alive).
        await wait_until(
            lambda: cancel_signalled(db, host_id, process_id), what="the sweep's cancel signal"
        )
        gate.set()
        run = await wait_terminal(database_url, db, host_id, process_id)
    # Honoured past the deadline, the signal ends the run as the deadline's end.
    assert run.state == "CANCELLED" and run.error["code"] == "WORKFLOW_TIMEOUT"
    assert run.error["retryable"] is False
    assert await _task_kinds(db, process_id) == ["gated"]


async def test_a_failing_task_is_logged_by_type_and_incident_without_its_message_or_trace(
    db: Database, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def leaky(task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
        raise RuntimeError("stored-secret-value")

    caplog.set_level(logging.DEBUG, logger="runtime.scheduler.executor")
    async with running(db, database_url, {"leaky": leaky}):
        host_id, process_id = await start(db, "leaky")
        run = await wait_terminal(database_url, db, host_id, process_id)
    assert run.state == "FAILED"
    records = [r for r in caplog.records if r.name == "runtime.scheduler.executor"]
    assert any("RuntimeError" in r.getMessage() and "incident" in r.getMessage() for r in records)
    assert not any("stored-secret-value" in r.getMessage() for r in records)
    assert not any(r.exc_info for r in records)
