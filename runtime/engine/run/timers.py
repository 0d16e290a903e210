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

Deadlines keep their meaning. A task or retry-attempt `timeout` is anchored at the wall time
its scope first began (``anchor``), so a replay keeps it instead of starting it again; a wait
that such a deadline would cut first parks until the deadline and, on resume, expires it at the
wait (the replay up to there runs held: ``Deadlines.hold``), which is the timeout outcome the
in-slot wait would have had. The run's own deadline, and the workflow `timeout` it is capped by,
are the runner's (the parked task is never made available past the point the run must stop, and
its sweep ends the run).

Fork branches: parking ends the whole run's task, so it would cancel the sibling branches, and
a sibling's write in flight would be left only possibly done. A long wait in a branch therefore
parks only once every live branch of the run waits on a timer (``Parking``): nothing is then in
flight, the run parks until the earliest of their due times, and the replay brings each branch
back to its wait. While some branch still works, the waiting ones sleep in the slot (that work
holds the slot anyway); after a branch failed they sleep in the slot too (the failure is being
reported; replaying it is not). A short wait (at most the allowance) always sleeps in the slot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from runtime.engine.run.runner import Runner

FORK_BRANCHES = "/fork/branches/"


class AwaitingTimer(Exception):
    """The run waits for a due time: park it with ``state`` and every recorded timer;
    ``parked`` are the keys of the waits it parks on (its replay is held until them)."""

    def __init__(
        self,
        due: float,
        timers: dict[str, float],
        state: dict[str, Any],
        parked: Sequence[str] = (),
    ) -> None:
        super().__init__(f"waiting until {due}")
        self.due = due
        self.timers = timers
        self.state = state
        self.parked = tuple(parked)


async def timed_sleep(runner: Runner, seconds: float, pointer: str) -> None:
    """Sleep in the slot when short, else park durably (until a deadline that cuts first)."""
    allowance = runner.limits.in_slot_wait_s
    if allowance is None:
        await runner.deadlines.sleep(seconds)
        return
    key = runner.timer_key(pointer)
    runner.deadlines.reached(key)
    now = time.time()
    # Short ones too: a replay after a later park neither sleeps them again nor decides
    # their retries anew (retry_elapsed_s).
    due = runner.state.timers.setdefault(key, now + seconds)
    left = due - now
    wake_in = min(left, runner.deadlines.scoped_remaining())
    if wake_in <= allowance:
        # A deadline that cuts the wait expires in this sleep: the timeout outcome.
        await runner.deadlines.sleep(max(left, 0.0))
        return
    if FORK_BRANCHES in pointer:
        await _wait_in_branch(runner, key, now + wake_in, left)
        return
    # Also an early wake (a restart, a cancel signal): the run parks again for the same time.
    raise AwaitingTimer(now + wake_in, dict(runner.state.timers), runner.checkpoint, (key,))


def anchor(runner: Runner, duration_ms: int | None, pointer: str) -> float | None:
    """When (wall clock) a timed scope first began, the same on every replay of it; None
    when it has no deadline or waits never park (its deadline then counts from now)."""
    if duration_ms is None or runner.limits.in_slot_wait_s is None:
        return None
    return runner.state.timers.setdefault(runner.timer_key(f"{pointer}/began"), time.time())


class Parking:
    """Whether every live flow of a run waits on a timer, so that the whole run may park.

    ``live`` counts the flows that run: the run itself, or while a fork runs its branches
    instead of it. A long wait in a branch registers its wake time in ``waiting``; when the
    waiting ones are all the live ones, the decision is one AwaitingTimer that each of them
    raises, so the run parks with nothing in flight.
    """

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self.live = 1
        self.waiting: dict[str, float] = {}
        self.failed = False
        self.decision: AwaitingTimer | None = None
        self.decided = asyncio.Event()

    def fork(self, runs: Sequence[asyncio.Future[Any]], compete: bool) -> set[Any]:
        """The fork's branches run instead of it; returns what ``joined`` needs."""
        self.live += len(runs) - 1
        counted = set(runs)
        for run in runs:
            run.add_done_callback(partial(self._ended, counted, compete))
        return counted

    def joined(self, counted: set[Any]) -> None:
        """The fork's branches all ended (their callbacks may still be due): it runs again."""
        self.live -= len(counted) - 1
        counted.clear()

    def _ended(self, counted: set[Any], compete: bool, run: asyncio.Future[Any]) -> None:
        if run not in counted:
            return
        counted.discard(run)
        self.live -= 1
        if run.cancelled():
            return  # its fork is stopping: that fork decides what follows
        if run.exception() is not None:
            self.failed = True
        elif not compete:  # a compete branch's success ends its fork
            self.consider()

    def consider(self) -> None:
        """Decide to park when every live flow waits and the earliest wake is not near."""
        if self.decision is not None or self.failed or not self.waiting:
            return
        if len(self.waiting) < self.live:
            return
        allowance = self._runner.limits.in_slot_wait_s
        due = min(self.waiting.values())
        if allowance is None or due - time.time() <= allowance:
            return
        runner = self._runner
        timers = dict(runner.state.timers)
        self.decision = AwaitingTimer(due, timers, runner.checkpoint, tuple(self.waiting))
        self.decided.set()


async def _wait_in_branch(runner: Runner, key: str, wake: float, left: float) -> None:
    """Sleep in the slot until the wait ends, unless the whole run parks meanwhile."""
    parking: Parking = runner.parking
    parking.waiting[key] = wake
    parking.consider()
    sleeper: asyncio.Future[None] | None = None
    woken: asyncio.Future[Any] | None = None
    try:
        if parking.decision is None:
            sleeper = asyncio.ensure_future(runner.deadlines.sleep(max(left, 0.0)))
            woken = asyncio.ensure_future(parking.decided.wait())
            await asyncio.wait((sleeper, woken), return_when=asyncio.FIRST_COMPLETED)
    finally:
        del parking.waiting[key]
        for each in (sleeper, woken):
            if each is not None and not each.done():
                each.cancel()
    decision = parking.decision
    if decision is not None:
        # Parked even when this wait just ended: it passes its due time on the replay.
        if sleeper is not None and sleeper.done() and not sleeper.cancelled():
            sleeper.exception()  # retrieved: the park, not a deadline, ends this flow
        raise AwaitingTimer(decision.due, decision.timers, decision.state, decision.parked)
    assert sleeper is not None
    sleeper.result()  # a deadline that cut the wait expires here


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
