"""How a run parked on a human task resumes: woken by an answer, resumed when its task is claimed.

An answer (``inbox.complete_task``) locks the human task (FOR UPDATE), records it and, in the
same transaction, wakes the parked task (``wake_parked``: available now, the run RUNNING);
after the commit ``announce_woken`` hands it to this process's executors first
(runtime.scheduler.wakeup). Migration 0080's park trigger locks the same row, so an answer that
commits before the parked task is inserted is seen by the trigger (the task goes in available
now), and one that commits after finds the parked task here. A timeout needs no waking: the
parked task's available_at is the due time. The claimed task's runner calls
``parking.settle``, which reads the answers and makes the run RUNNING (``resume_waiting``).

A parked task and its run's state are the scheduler's rows; these are the only writes other
rooms make to them, through this module (and the trigger).
"""

from __future__ import annotations

from runtime.human_tasks import store
from runtime.scheduler import announce_task
from runtime.store import Connection, Database


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
