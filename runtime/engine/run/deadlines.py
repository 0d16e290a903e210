"""Deterministic timeouts: task and workflow `timeout`, retry attempt duration, run deadline.

Every deadline is a point on the injected Clock. Waits and retry delays sleep only up to the
earliest active deadline and then expire it; every task start checks the deadlines. With a
fake clock the same definition therefore always times out at the same place. An in-flight
call cannot be paused, so it is also cut by the event loop's timer at the remaining time.

The active deadlines live in a ContextVar: each fork branch (its own asyncio task) sees the
deadlines of its ancestors and its own, never a sibling's.

Under durable timers (``timers``) a task or attempt deadline is anchored at the wall time its
scope first began, so a run parked inside it and replayed later keeps the deadline it had. A
replay runs again, without any deadline, what the parked run did before the waits it parked
on (``hold``): that part ran within its deadlines then, and a deadline that has passed since
(the park lasted until it) expires at the wait that parked, where it would have cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from runtime.engine.run.faults import fault
from runtime.engine.run.ports import Clock

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Deadline:
    """One active deadline: when (clock seconds) and which fault it raises."""

    at: float
    pointer: str
    title: str


class DeadlineExpired(Exception):
    """A deadline passed; only its own scope turns it into a timeout fault.

    Not a WorkflowFault on purpose: a try/catch inside a timed-out task cannot swallow the
    expiry of the task (or workflow) around it.
    """

    def __init__(self, deadline: Deadline) -> None:
        super().__init__(f"deadline of {deadline.pointer} expired")
        self.deadline = deadline


_ACTIVE: ContextVar[tuple[Deadline, ...]] = ContextVar("workflow_deadlines", default=())
_NOTHING_HELD: frozenset[str] = frozenset()
# Whether this flow of the run (the run itself, or a fork branch) still replays towards the
# wait it parked on; a branch copies it at its start and clears its own copy there.
_REPLAYING: ContextVar[bool] = ContextVar("workflow_replaying", default=False)


class Deadlines:
    """The deadline operations of one interpreter, on its clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        # The keys of the waits a parked run parked on, not yet reached by its replay (a
        # shared empty set until a resume holds some: a run that never parked allocates none).
        self._held: set[str] | frozenset[str] = _NOTHING_HELD

    @contextlib.contextmanager
    def scope(
        self, duration_ms: int | None, pointer: str, title: str, began: float | None = None
    ) -> Iterator[None]:
        """Run the body under a deadline duration_ms from now (None: no deadline), or from
        ``began`` (wall clock) when the scope began before a park."""
        if duration_ms is None:
            yield
            return
        at = self._clock.now() + duration_ms / 1000
        if began is not None:
            at -= max(time.time() - began, 0.0)
        deadline = Deadline(at, pointer, title)
        token = _ACTIVE.set((*_ACTIVE.get(), deadline))
        try:
            yield
        except DeadlineExpired as expired:
            if expired.deadline is not deadline:
                raise
            raise fault("timeout", pointer, title=title) from None
        finally:
            _ACTIVE.reset(token)

    def earliest(self) -> Deadline | None:
        """The active deadline that expires first."""
        active = _ACTIVE.get()
        return min(active, key=lambda d: d.at) if active else None

    def scoped_remaining(self) -> float:
        """Clock seconds until the earliest task or attempt deadline (not the run's or the
        workflow's, pointer '/': a durable runner enforces those itself); inf without one."""
        remaining = [d.at for d in _ACTIVE.get() if d.pointer != "/"]
        return min(remaining) - self._clock.now() if remaining else float("inf")

    def hold(self, keys: list[str]) -> None:
        """Replay without deadlines until each of these parked waits is reached."""
        if keys:
            self._held = set(keys)
            _REPLAYING.set(True)

    def reached(self, key: str) -> None:
        """A wait was reached: if it is one the run parked on, this flow replays no longer."""
        held = self._held
        if key in held and isinstance(held, set):
            held.discard(key)
            _REPLAYING.set(False)

    def release(self) -> None:
        """The replayed top-level task ended: nothing is held any more."""
        self._held = _NOTHING_HELD

    def _holding(self) -> bool:
        return bool(self._held) and _REPLAYING.get()

    def check(self) -> None:
        """Expire the earliest deadline if it has passed."""
        if self._held and self._holding():
            return
        deadline = self.earliest()
        if deadline is not None and self._clock.now() >= deadline.at:
            raise DeadlineExpired(deadline)

    async def sleep(self, seconds: float) -> None:
        """Sleep on the clock, but never past the earliest deadline (which then expires)."""
        deadline = self.earliest()
        if deadline is None or (self._held and self._holding()):
            await self._clock.sleep(seconds)
            return
        remaining = deadline.at - self._clock.now()
        if seconds >= remaining:
            await self._clock.sleep(max(remaining, 0.0))
            raise DeadlineExpired(deadline)
        await self._clock.sleep(seconds)

    async def bound(self, call: Awaitable[T]) -> T:
        """Await an outbound call, cut at the earliest deadline."""
        self.check()
        deadline = self.earliest()
        if deadline is None or (self._held and self._holding()):
            return await call
        try:
            async with asyncio.timeout(max(deadline.at - self._clock.now(), 0.0)):
                return await call
        except TimeoutError:
            raise DeadlineExpired(deadline) from None
