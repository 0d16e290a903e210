"""One dedicated autocommit LISTEN connection per executor, with keepalive and reconnect.

NOTIFY is only a wake-up: the callback is told "something may be ready" (or, after a
reconnect, "you may have missed something") and the executor then claims from the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import random
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from runtime.cancellation import reraise_if_cancelled

log = logging.getLogger(__name__)

TASK_READY_CHANNEL = "workflow_task_ready"
# A run's end is announced on one of 16 channels, chosen by the last hex digit of its id (the
# SQL that notifies and the waiters that listen agree on it), so each of N result-waiter
# connections hears only its own share of the ends instead of every one.
PROCESS_STATE_CHANNELS = 16


def process_state_channels(index: int, shards: int) -> list[str]:
    """The channels result-waiter connection `index` of `shards` listens on."""
    return [
        f"workflow_process_state_{slot:x}"
        for slot in range(PROCESS_STATE_CHANNELS)
        if slot % shards == index
    ]


# TCP keepalive so a silently dead link is noticed; libpq ignores these on Unix sockets.
_KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}
# How long close() waits for the cancelled pump before closing the connection under it.
_CLOSE_WAIT_S = 5.0
Callback = Callable[[dict[str, Any] | None], None]


class NotificationListener:
    """LISTENs on channels and calls on_event(payload) per NOTIFY, on_event(None) on reconnect."""

    def __init__(
        self,
        conninfo: str,
        channels: Sequence[str],
        on_event: Callback,
        *,
        max_backoff_s: float = 2.0,
    ) -> None:
        self._conninfo = conninfo
        self._channels = tuple(channels)
        self._on_event = on_event
        self._max_backoff_s = max_backoff_s
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._closing = False
        self.reconnects = 0

    async def start(self) -> None:
        """Connect and LISTEN; returns once LISTEN is in effect (before any catch-up claim)."""
        self._conn = await self._connect()
        self._closing = False
        # A fresh context: started lazily inside a tools/call, the pump must not carry that
        # call's correlation id, host or tool into its own log lines for the process's life.
        self._pump = asyncio.create_task(
            self._run(), name="notification-listener", context=contextvars.Context()
        )

    async def close(self) -> None:
        """Stop listening and close the connection."""
        self._closing = True
        if self._pump is not None:
            self._pump.cancel()
            # Bounded: a pump that somehow ignores its cancellation must not hold a shutdown.
            await asyncio.wait([self._pump], timeout=_CLOSE_WAIT_S)
            self._pump = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conninfo = make_conninfo(self._conninfo, **_KEEPALIVE)
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
        for channel in self._channels:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        return conn

    async def _run(self) -> None:
        while True:
            try:
                await self._drain()
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                reraise_if_cancelled(exc)
                if self._closing:
                    return  # our own shutdown closed it
                log.warning("notification listener lost its connection: %s", type(exc).__name__)
            await self._reconnect()

    async def _drain(self) -> None:
        if self._conn is None:
            raise psycopg.InterfaceError("listener not connected")
        async for notify in self._conn.notifies():
            self._on_event(_payload(notify.payload))

    async def _reconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                await self._conn.close()
            self._conn = None
        delay = 0.05
        while self._conn is None:
            try:
                self._conn = await self._connect()
            except psycopg.Error as exc:
                reraise_if_cancelled(exc)
                await asyncio.sleep(random.uniform(0, delay))
                delay = min(self._max_backoff_s, delay * 2)
        self.reconnects += 1
        # Notifications sent while we were away are gone: ask for a catch-up claim.
        self._on_event(None)

    @property
    def backend_pid(self) -> int | None:
        """The server process id of the LISTEN connection (for diagnostics and tests)."""
        return None if self._conn is None else self._conn.info.backend_pid


def _payload(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
