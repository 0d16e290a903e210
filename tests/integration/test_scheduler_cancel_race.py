"""Cancelling before effects races the first effect: never both a cancel and a dispatch."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from runtime.errors import WorkflowError
from runtime.scheduler import service
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.models import NewTask, SchedulerSettings
from runtime.scheduler.store import queue
from runtime.scheduler.store import runs as scheduler_runs
from runtime.store import Database

pytestmark = pytest.mark.requirement("000:Waiting, timeout and re-attach")


async def _cancel_before_effects(db: Database, host_id: str, process_id: str) -> bool:
    """What a before-effects-only cancel does: lock the run, end it only while no effect."""
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT effect_state FROM workflow_process"
            " WHERE host_id = %s AND process_id = %s FOR UPDATE",
            (host_id, process_id),
        )
        row = await cursor.fetchone()
        assert row is not None
        if row["effect_state"] != "none":
            return False
        await asyncio.sleep(0.01)  # widen the window a concurrent dispatch could slip into
        error = WorkflowError("WORKFLOW_CANCELLED", "cancelled", status="cancelled")
        return await scheduler_runs.fail_process(
            conn, host_id, process_id, error, state="CANCELLED"
        )


async def _dispatch(db: Database, lease: object) -> bool:
    try:
        await service.mark_effect_possible(db, lease, 1)  # type: ignore[arg-type]
    except LeaseLost:
        return False
    return True


async def test_a_cancel_and_a_first_effect_never_both_win(db: Database) -> None:
    for _ in range(25):
        host_id = str(uuid.uuid4())
        process_id = await service.start_run(db, host_id=host_id, first_task=NewTask("echo", {}))
        async with db.transaction() as conn:
            [(_, lease)] = await queue.claim_tasks(
                conn, queue.ClaimRequest("w1", 4, 2, 2, 0), SchedulerSettings()
            )
        cancelled, dispatched = await asyncio.gather(
            _cancel_before_effects(db, host_id, process_id), _dispatch(db, lease)
        )
        run = await service.get_process(db, host_id, process_id)
        assert run is not None
        # Exactly one side wins, and the run's record agrees with the winner.
        assert cancelled != dispatched, (cancelled, dispatched, run)
        if cancelled:
            assert run["state"] == "CANCELLED" and run["effect_state"] == "none"
        else:
            assert run["state"] == "RUNNING" and run["effect_state"] == "possible"
