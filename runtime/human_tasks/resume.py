"""Runs parked on a human task: woken by an answer, resumed when their task is claimed.

A parked run's next task is an ordinary ready task whose available_at is the human task's due
time (its timer); these are the only writes other domains make to it, through this module.
"""

from __future__ import annotations

from runtime.human_tasks import store
from runtime.scheduler import announce_task
from runtime.store import Connection, Database

# The payload key naming the human task a parked task waits for (migration 0080's trigger).
HUMAN_TASK_KEY = "humanTaskId"


async def wake_parked(
    conn: Connection, host_id: str, process_id: str, human_task_id: str
) -> tuple[str, str] | None:
    """In the answering transaction: the parked task is ready now; announce it after commit."""
    return await store.wake_parked_task(conn, host_id, process_id, human_task_id)


def announce_woken(db: Database, woken: tuple[str, str] | None) -> None:
    """After the commit: wake the executors for a woken task (this process's first)."""
    if woken is not None:
        announce_task(db, *woken)


async def resume_waiting(conn: Connection, host_id: str, process_id: str) -> None:
    """A parked run whose task runs again is RUNNING."""
    await store.resume_waiting_run(conn, host_id, process_id)
