"""Durable timers: a long `wait` or retry back-off parks the run instead of sleeping in its slot.

Why: a sleep inside the run holds one of the executor's slots for the whole wait (two runs
waiting ten minutes stalled every other standard run), and a restart began the wait again.
A wait longer than the in-slot allowance (``RunLimits.in_slot_wait_s``; None: never park, the
pure interpreter's default) raises AwaitingTimer with its due time (wall clock, epoch
seconds) and the checkpoint before its top-level task; the durable runner ends the scheduler
task with a successor that becomes available at the due time and carries every due time the
top-level task recorded. On resume the top-level task replays from that checkpoint (its
writes from the step ledger, as after any reclaim); each wait finds its recorded due time by
its key (pointer and how often it was reached, as an ask's) and goes on once it passed, so a
restart never begins a wait again: it ends at its ORIGINAL due time.

Deadlines keep their meaning: a wait that a task, retry-attempt or workflow timeout would cut
first sleeps in the slot up to that deadline as before (those scopes restart on a replay, so
parking across them would stretch them); the run's own deadline is the runner's (the parked
task is never made available past the point the run must stop, and its sweep ends the run).
A wait inside a fork branch also stays in the slot: parking would cancel the sibling branches,
and a sibling's write in flight would be left only possibly done.
"""

from __future__ import annotations

import time
from typing import Any

from runtime.engine.run.runner import Runner

FORK_BRANCHES = "/fork/branches/"


class AwaitingTimer(Exception):
    """The run waits for a due time: park it with ``state`` and every recorded timer."""

    def __init__(self, due: float, timers: dict[str, float], state: dict[str, Any]) -> None:
        super().__init__(f"waiting until {due}")
        self.due = due
        self.timers = timers
        self.state = state


async def timed_sleep(runner: Runner, seconds: float, pointer: str) -> None:
    """Sleep in the slot when short (or bounded by a task deadline), else park durably."""
    allowance = runner.limits.in_slot_wait_s
    if allowance is None or FORK_BRANCHES in pointer:
        await runner.deadlines.sleep(seconds)
        return
    key = runner.timer_key(pointer)
    now = time.time()
    due = runner.state.timers.get(key)
    if due is None:
        if _cut_first(runner, seconds):
            await runner.deadlines.sleep(seconds)
            return
        due = now + seconds
        # Short ones too: a replay after a later park neither sleeps them again nor decides
        # their retries anew (retry_elapsed_s).
        runner.state.timers[key] = due
    left = due - now
    if left <= allowance:
        await runner.deadlines.sleep(max(left, 0.0))
        return
    # Also an early wake (a restart, a cancel signal): the run parks again for the same time.
    raise AwaitingTimer(due, dict(runner.state.timers), runner.checkpoint)


def started_at(runner: Runner, pointer: str) -> float:
    """When a retrying task first started, on the clock: the same on every replay of it.

    A retry's limit.duration counts from there; counted from the replay, each parked back-off
    would grant the retries a whole new duration. Recorded beside the due times (wall clock).
    """
    now = runner.clock.now()
    if runner.limits.in_slot_wait_s is None:
        return now
    began = runner.state.timers.setdefault(runner.timer_key(f"{pointer}/started"), time.time())
    return now - max(time.time() - began, 0.0)


def retry_elapsed_s(runner: Runner, pointer: str, started: float) -> float:
    """Seconds a retrying task has run when it decides on its next back-off.

    A back-off recorded before this replay was decided then, in time: it stands (its limit
    was checked then), whatever the clock says now.
    """
    recorded = runner.state.timers
    if runner.limits.in_slot_wait_s is not None and (
        runner.timer_key(f"{pointer}/retry", peek=True) in recorded
    ):
        return 0.0
    return runner.clock.now() - started


def _cut_first(runner: Runner, seconds: float) -> bool:
    """Whether an active task, attempt or workflow deadline expires before the wait ends."""
    deadline = runner.deadlines.earliest()
    return deadline is not None and deadline.at - runner.clock.now() <= seconds
