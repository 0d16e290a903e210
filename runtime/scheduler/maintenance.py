"""Reaping expired leases and enforcing deadlines: one transaction per sweep."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runtime.scheduler import faults
from runtime.scheduler.errors import timeout_error
from runtime.scheduler.models import SchedulerSettings
from runtime.scheduler.store import queue, runs
from runtime.store import Database
from runtime.telemetry import metrics

SWEEP_LOCKED_POINT = "deadline_sweep_locked"


@dataclass(frozen=True)
class SweepReport:
    """What one reaper or deadline sweep did."""

    reclaimed: int = 0
    timed_out: int = 0
    signalled: int = 0
    left_running: int = 0


async def reap_expired_once(
    db: Database, settings: SchedulerSettings, fair: Callable[[], bool] | None = None
) -> SweepReport:
    """Reclaim expired leases whose run can still finish; time out the runs that cannot.

    fair: asked once the transaction began (a BEGIN may wait out a database restart); False
    means the leases that ran out meanwhile say nothing about their workers: reap nothing now.
    """
    reclaimed = timed_out = waiting = 0
    async with db.transaction() as conn:
        if fair is not None and not fair():
            return SweepReport()
        for row in await queue.reap_expired(conn, settings):
            if row.decision == "reclaim":
                reclaimed += 1
            elif row.decision == "wait":
                waiting += 1
            else:
                host_id, process_id = str(row.host_id), str(row.process_id)
                # Never wait on another task row of the run while holding its run row (the
                # lock order, runs.lock_process): a run with one held is ended next round.
                if await runs.lock_open_tasks_now(conn, host_id, process_id):
                    error = timeout_error(after_effect=row.effect_state != "none")
                    timed_out += await runs.fail_process(conn, host_id, process_id, error)
    metrics.record_reclaims(reclaimed)
    return SweepReport(reclaimed=reclaimed, timed_out=timed_out, left_running=waiting)


async def sweep_deadlines_once(db: Database, settings: SchedulerSettings) -> SweepReport:
    """End runs past their deadline as their cancellation policy says.

    before-effects-only: time out unless an effect may be in flight on a live worker, which
    is left to finish (its completion then ends the run). cooperative: signal a live worker,
    time out otherwise. disabled: selected only past the hard ceiling (deadline plus the write
    overrun), where the run times out whatever it is doing, so it never holds a slot for ever.
    A run timed out here ends CANCELLED with WORKFLOW_TIMEOUT, as when a caller re-attaching
    past the deadline ends it (runtime.scheduler.errors.ending_state).
    """
    timed_out = signalled = left = 0
    async with db.transaction() as conn:
        late = await queue.late_runs(conn, settings)
        # Lets a test hold the locked late runs while a caller re-attaches to one of them.
        await faults.point(SWEEP_LOCKED_POINT)
        for row in late:
            host_id, process_id = str(row.host_id), str(row.process_id)
            # The run rows were taken without waiting; so are their task rows, since a claim
            # or completion holding one waits for the run row (the lock order,
            # runs.lock_process). A run with one held is left to the next round.
            if not await runs.lock_open_tasks_now(conn, host_id, process_id):
                continue
            live = row.has_live_task and row.cancellation_policy != "disabled"
            if live and row.cancellation_policy == "cooperative":
                signalled += await runs.request_cancel(conn, host_id, process_id)
            elif live and row.effect_state != "none":
                left += 1
            else:
                error = timeout_error(after_effect=row.effect_state != "none")
                timed_out += await runs.fail_process(conn, host_id, process_id, error)
    return SweepReport(timed_out=timed_out, signalled=signalled, left_running=left)
