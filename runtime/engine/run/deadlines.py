"""Deterministic timeouts: task and workflow `timeout`, retry attempt duration, run deadline.

Every deadline is a point on the injected Clock. Waits and retry delays sleep only up to the
earliest active deadline and then expire it; every task start checks the deadlines. With a
fake clock the same definition therefore always times out at the same place. An in-flight
call cannot be paused, so it is also cut by the event loop's timer at the remaining time.

The active deadlines live in a ContextVar: each fork branch (its own asyncio task) sees the
deadlines of its ancestors and its own, never a sibling's.
"""

from __future__ import annotations

import asyncio
import contextlib
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


class Deadlines:
    """The deadline operations of one interpreter, on its clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    @contextlib.contextmanager
    def scope(self, duration_ms: int | None, pointer: str, title: str) -> Iterator[None]:
        """Run the body under a deadline duration_ms from now (None: no deadline)."""
        if duration_ms is None:
            yield
            return
        deadline = Deadline(self._clock.now() + duration_ms / 1000, pointer, title)
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

    def check(self) -> None:
        """Expire the earliest deadline if it has passed."""
        deadline = self.earliest()
        if deadline is not None and self._clock.now() >= deadline.at:
            raise DeadlineExpired(deadline)

    async def sleep(self, seconds: float) -> None:
        """Sleep on the clock, but never past the earliest deadline (which then expires)."""
        deadline = self.earliest()
        if deadline is None:
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
        if deadline is None:
            return await call
        try:
            async with asyncio.timeout(max(deadline.at - self._clock.now(), 0.0)):
                return await call
        except TimeoutError:
            raise DeadlineExpired(deadline) from None
