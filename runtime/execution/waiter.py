"""Result waiters multiplexed over one LISTEN connection per database (NOTIFY is a wake-up)."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from typing import Any

from runtime.scheduler.store.listener import PROCESS_STATE_CHANNEL, NotificationListener
from runtime.store import Database

TERMINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED"})


class Wakeup:
    """One waiter's event: set by a NOTIFY for its run (or by a listener reconnect)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        """Wake the waiter."""
        self._event.set()

    async def wait_once(self, timeout_s: float) -> None:
        """Wait for a wake-up or the timeout, then re-arm."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(timeout_s, 0)):
                await self._event.wait()
        self._event.clear()


class ResultWaiter:
    """Routes process-state notifications to the waiters of each run."""

    def __init__(self, conninfo: str, poll_interval_s: float = 0.25) -> None:
        self.poll_interval_s = poll_interval_s
        self._waiting: dict[str, set[Wakeup]] = {}
        self._listener = NotificationListener(conninfo, [PROCESS_STATE_CHANNEL], self._notified)
        self._started = False
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """LISTEN once (idempotent)."""
        async with self._lock:
            if not self._started:
                await self._listener.start()
                self._started = True

    async def close(self) -> None:
        """Stop listening."""
        await self._listener.close()
        self._started = False

    def _notified(self, payload: dict[str, Any] | None) -> None:
        if payload is None:
            # Reconnected: anything may have been missed, wake everyone to re-read.
            for wakeups in self._waiting.values():
                for wakeup in wakeups:
                    wakeup.set()
            return
        for wakeup in self._waiting.get(str(payload.get("id")), ()):
            wakeup.set()

    @contextlib.asynccontextmanager
    async def watch(self, process_id: str) -> AsyncIterator[Wakeup]:
        """Register interest in one run before reading it, so no NOTIFY slips between."""
        wakeup = Wakeup()
        self._waiting.setdefault(process_id, set()).add(wakeup)
        try:
            yield wakeup
        finally:
            wakeups = self._waiting.get(process_id)
            if wakeups is not None:
                wakeups.discard(wakeup)
                if not wakeups:
                    del self._waiting[process_id]


_WAITERS: weakref.WeakKeyDictionary[Database, ResultWaiter] = weakref.WeakKeyDictionary()


def configure_waiter(db: Database, *, poll_interval_s: float) -> ResultWaiter:
    """Create a database's shared waiter with its own fallback poll interval (before first use)."""
    conninfo = db.pool.conninfo
    if not isinstance(conninfo, str):
        raise ValueError("the pool's conninfo is computed; cannot open a LISTEN connection")
    waiter = ResultWaiter(conninfo, poll_interval_s)
    _WAITERS[db] = waiter
    return waiter


async def waiter_for(db: Database) -> ResultWaiter:
    """The shared waiter of a database (one LISTEN connection), started on first use."""
    waiter = _WAITERS.get(db)
    if waiter is None:
        waiter = configure_waiter(db, poll_interval_s=0.25)
    await waiter.start()
    return waiter


async def close_waiter(db: Database) -> None:
    """Close a database's shared waiter (tests and shutdown)."""
    waiter = _WAITERS.pop(db, None)
    if waiter is not None:
        await waiter.close()
