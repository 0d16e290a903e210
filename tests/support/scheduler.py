"""Scheduler test pieces: an admin connection, an executor, run starters, a gated handler."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import psycopg

from runtime.scheduler import Executor, enqueue_process, service
from runtime.scheduler.lease import TaskHandler, TaskLease
from runtime.scheduler.models import ClaimedTask, NewTask, SchedulerSettings, TaskOutcome
from runtime.scheduler.store import runs
from runtime.store import Database
from tests.support.demo import HANDLERS

# A fallback poll of a minute: anything claimed within the test's bound was woken by NOTIFY.
NO_POLL = SchedulerSettings(poll_interval_ms=60_000)
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")


def process_state_channel(process_id: str) -> str:
    """The channel a run's end is notified on, as queries.sql names it (the last hex digit)."""
    return f"workflow_process_state_{process_id[-1:].lower()}"


@asynccontextmanager
async def running(
    db: Database,
    database_url: str,
    handlers: Mapping[str, TaskHandler] = HANDLERS,
    settings: SchedulerSettings = NO_POLL,
) -> AsyncIterator[Executor]:
    executor = Executor(db, handlers, settings, conninfo=database_url)
    await executor.start()
    try:
        yield executor
    finally:
        await executor.stop()


async def wait_terminal(database_url: str, db: Database, host_id: str, process_id: str) -> Any:
    """Wait (bounded) for the run's terminal-state NOTIFY, then return the run."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"LISTEN {process_state_channel(process_id)}")
        async with asyncio.timeout(10):
            run = await service.get_process(db, host_id, process_id)
            while run is None or run.state not in TERMINAL:
                async for notify in conn.notifies():
                    if json.loads(notify.payload)["id"] == process_id:
                        break
                run = await service.get_process(db, host_id, process_id)
    return run


async def enqueue(db: Database, **kwargs: Any) -> str:
    """A run enqueued in its own transaction (enqueue_process, as admission writes one)."""
    async with db.transaction() as conn:
        return await enqueue_process(conn, **kwargs)


async def start(db: Database, kind: str = "echo", **kwargs: Any) -> tuple[str, str]:
    host_id = str(uuid.uuid4())
    payload = kwargs.pop("payload", {})
    first = NewTask(kind, payload, available_at=kwargs.pop("first_task_available_at", None))
    process_id = await enqueue(db, host_id=host_id, first_task=first, **kwargs)
    return host_id, process_id


def gated(gate: asyncio.Event, started: asyncio.Event, *, write: bool) -> TaskHandler:
    """A handler that (optionally marks an effect possible and) waits for gate."""

    async def handler(task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
        if write:
            await lease.mark_effect_possible()
        started.set()
        await gate.wait()
        if write:
            await lease.confirm_effect({"written": True})
        return TaskOutcome.then(NewTask("echo", {}))

    return handler


async def cancel_signalled(db: Database, host_id: str, process_id: str) -> bool:
    """Whether the run's cooperative cancel signal is raised."""
    async with db.connection() as conn:
        row = await runs.select_cancel_signal(conn, host_id, process_id)
    return bool(row and row.cancel_requested)
