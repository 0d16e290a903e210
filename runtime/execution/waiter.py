"""Result waiters multiplexed over one LISTEN connection per database (NOTIFY is a wake-up).

A run completed by an executor of this process is handed to its waiters directly (the
scheduler's outcome hub), so they need no read; NOTIFY plus a read serves runs completed
elsewhere.

Seed 001 bounds the dedicated LISTEN connections (WORKFLOW_WAIT_LISTENER_CONNECTIONS, default
8). Waiters are spread over N connections by a stable hash of the run id; all N LISTEN from the
waiter's start, and each wakes only its own waiters, so a dropped connection
only sends its share to polling until it reconnects. A bound of 0 opens none and every waiter
polls durable status at a short interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
import zlib
from collections.abc import AsyncIterator
from typing import Any

from runtime.scheduler.models import TERMINAL_STATES, RunSnapshot
from runtime.scheduler.outcomes import HUB
from runtime.scheduler.store.listener import (
    PROCESS_STATE_CHANNELS,
    NotificationListener,
    process_state_channels,
)
from runtime.store import Database

__all__ = [
    "TERMINAL_STATES",
    "ResultWaiter",
    "Wakeup",
    "close_waiter",
    "stop_waiting",
    "waiter_for",
]
DEFAULT_POLL_INTERVAL_S = 1.0
# Without a LISTEN connection nothing wakes a waiter for a run completed elsewhere: poll often.
POLLING_ONLY_INTERVAL_S = 0.25


class Wakeup:
    """One waiter's event: set by a NOTIFY for its run, a listener reconnect or a hand-over."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._handed: RunSnapshot | None = None
        # Set once the process is shutting down: the wait ends now, the run goes on durably.
        self.stopped = False

    def stop(self) -> None:
        """End the wait for good (shutdown): the waiter reads the run once more and answers."""
        self.stopped = True
        self._event.set()

    def set(self) -> None:
        """Wake the waiter (it reads the run)."""
        self._event.set()

    def hand(self, snapshot: RunSnapshot | None) -> None:
        """Wake the waiter with the run's committed end (None: it reads the run)."""
        if snapshot is not None:
            self._handed = snapshot
        self._event.set()

    def take(self) -> RunSnapshot | None:
        """The run's end handed over by this process's executor, once."""
        handed, self._handed = self._handed, None
        return handed

    async def wait_once(self, timeout_s: float) -> bool:
        """Wait for a wake-up or the timeout, then re-arm; False on the timeout."""
        woken = True
        try:
            async with asyncio.timeout(max(timeout_s, 0)):
                await self._event.wait()
        except TimeoutError:
            woken = False
        self._event.clear()
        return woken


class _Shard:
    """One LISTEN connection and the waiters whose runs hash to it.

    A drop and reconnect wakes only this shard's waiters (they poll durable status at the
    fallback interval meanwhile).
    """

    def __init__(self, conninfo: str, index: int, shards: int) -> None:
        self.index, self.shards = index, shards
        self.waiting: dict[str, set[Wakeup]] = {}
        channels = process_state_channels(index, shards)
        self.listener = NotificationListener(conninfo, channels, self._notified)
        self._started = False
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """LISTEN once (idempotent)."""
        if self._started:
            return
        async with self._lock:
            if not self._started:
                await self.listener.start()
                self._started = True

    async def close(self) -> None:
        """Stop listening."""
        async with self._lock:
            await self.listener.close()
            self._started = False

    def _notified(self, payload: dict[str, Any] | None) -> None:
        if payload is None:
            # Reconnected: anything may have been missed, wake this shard's waiters to re-read.
            for wakeups in self.waiting.values():
                for wakeup in wakeups:
                    wakeup.set()
            return
        process_id = str(payload.get("id"))
        if HUB.hold(process_id):
            return  # its completion is in flight here: it hands the end over (or wakes us)
        for wakeup in self.waiting.get(process_id, ()):
            wakeup.set()


def shard_index(process_id: str, shards: int) -> int:
    """The listener a run's waiters use: the one listening on the run's channel."""
    try:
        slot = int(process_id[-1:], 16)
    except ValueError:
        slot = zlib.crc32(process_id.encode()) % PROCESS_STATE_CHANNELS
    return slot % shards


class ResultWaiter:
    """Routes process-state notifications to the waiters of each run, over N LISTEN shards."""

    def __init__(
        self,
        conninfo: str,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        *,
        listener_connections: int = 1,
    ) -> None:
        if listener_connections < 0:
            raise ValueError("listener_connections must not be negative")
        # More connections than channels would leave some with nothing to hear.
        shards = min(listener_connections, PROCESS_STATE_CHANNELS)
        self._shards = [_Shard(conninfo, index, shards) for index in range(shards)]
        self._polling: dict[str, set[Wakeup]] = {}
        self.stopped = False
        if self._shards:
            self.poll_interval_s = poll_interval_s
        else:
            self.poll_interval_s = min(poll_interval_s, POLLING_ONLY_INTERVAL_S)

    async def start(self) -> None:
        """LISTEN on every shard (idempotent; nothing to start when polling only)."""
        for shard in self._shards:
            await shard.start()

    async def close(self) -> None:
        """Stop listening on every shard."""
        for shard in self._shards:
            await shard.close()

    def stop_waiting(self) -> None:
        """Shutdown: end every wait now and any later one at once (each answers what it has).

        A draining server must answer its in-flight calls within its grace, and a sync wait
        lasts up to syncWaitMs: the runs are durable, so the callers get WORKFLOW_TIMEOUT with
        the instance and re-attach later, instead of the stop waiting their waits out.
        """
        self.stopped = True
        for waiting in (self._polling, *(shard.waiting for shard in self._shards)):
            for wakeups in waiting.values():
                for wakeup in wakeups:
                    wakeup.stop()

    def _waiting_for(self, process_id: str) -> dict[str, set[Wakeup]]:
        if not self._shards:
            return self._polling
        return self._shards[shard_index(process_id, len(self._shards))].waiting

    async def _listen_for(self, process_id: str) -> None:
        if self._shards:
            await self._shards[shard_index(process_id, len(self._shards))].start()

    @contextlib.asynccontextmanager
    async def watch(self, process_id: str) -> AsyncIterator[Wakeup]:
        """Register interest in one run before reading it, so no NOTIFY slips between."""
        await self._listen_for(process_id)
        wakeup = Wakeup()
        if self.stopped:
            wakeup.stop()
        waiting = self._waiting_for(process_id)
        waiting.setdefault(process_id, set()).add(wakeup)
        unsubscribe = HUB.subscribe(process_id, wakeup.hand)
        try:
            yield wakeup
        finally:
            unsubscribe()
            wakeups = waiting.get(process_id)
            if wakeups is not None:
                wakeups.discard(wakeup)
                if not wakeups:
                    del waiting[process_id]


_WAITERS: weakref.WeakKeyDictionary[Database, ResultWaiter] = weakref.WeakKeyDictionary()


def configure_waiter(
    db: Database, *, poll_interval_s: float = DEFAULT_POLL_INTERVAL_S, listener_connections: int = 1
) -> ResultWaiter:
    """Create a database's shared waiter (before first use): its fallback poll interval and its
    LISTEN connection bound (0: none, waiters poll durable status)."""
    conninfo = db.pool.conninfo
    if not isinstance(conninfo, str):
        raise ValueError("the pool's conninfo is computed; cannot open a LISTEN connection")
    waiter = ResultWaiter(conninfo, poll_interval_s, listener_connections=listener_connections)
    if db not in _WAITERS:
        # Its LISTEN connections close with the database, whoever forgets close_waiter.
        db.on_close(lambda: close_waiter(db))
    _WAITERS[db] = waiter
    return waiter


async def waiter_for(db: Database) -> ResultWaiter:
    """The shared waiter of a database (its LISTEN connections open on first use)."""
    waiter = _WAITERS.get(db)
    if waiter is None:
        waiter = configure_waiter(db, poll_interval_s=DEFAULT_POLL_INTERVAL_S)
    await waiter.start()
    return waiter


def stop_waiting(db: Database) -> None:
    """End every result wait on db now (a server draining for shutdown; see ResultWaiter)."""
    waiter = _WAITERS.get(db)
    if waiter is not None:
        waiter.stop_waiting()


async def close_waiter(db: Database) -> None:
    """Close a database's shared waiter (tests and shutdown)."""
    waiter = _WAITERS.pop(db, None)
    if waiter is not None:
        await waiter.close()
