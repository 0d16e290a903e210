"""Announcing a task committed without a NOTIFY: this process's executors at once, the others soon.

An admission that notifies inside its own transaction holds PostgreSQL's notification-queue
lock through its commit's WAL flush, and with it every lock it took: a popular Tool's admission
lock then waited on every other notifying commit of the database (measured: ten connections
queued on one Tool's lock at 50 callers). So the admission commits without a NOTIFY and wakes
this process's executors directly; only when none of them has a free slot for the task is the
NOTIFY sent, in a statement of its own, for the executors of other processes (sending it
always made this process's executor claim twice, the second time for nothing). NOTIFY is only
a wake-up: a lost one costs a poll interval, never a task.
"""

from __future__ import annotations

import asyncio
import logging

from runtime.scheduler.executor import wake_local_executors
from runtime.scheduler.store import queue
from runtime.store import Database

log = logging.getLogger(__name__)

# NOTIFYs in flight: kept so none is garbage-collected before it ran.
_PENDING: set[asyncio.Task[None]] = set()


async def _notify(db: Database, task_id: str) -> None:
    try:
        async with db.connection() as conn:
            await queue.notify_task_ready(conn, task_id)
    except Exception as exc:
        # Only the type: messages can carry connection details. Other processes poll.
        log.debug("task-ready notification not sent: %s", type(exc).__name__)


def announce_task(db: Database, task_id: str, execution_class: str) -> None:
    """Wake this process's executors now, other processes' when they have no room (at once)."""
    if wake_local_executors(execution_class):
        return
    task = asyncio.get_running_loop().create_task(_notify(db, task_id))
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)
