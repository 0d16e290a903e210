"""Announcing what was committed without a NOTIFY: new tasks and ended runs.

A transaction that notifies holds PostgreSQL's notification-queue lock from just before its
commit record until the end of its WAL flush, so notifying commits of the whole database queue
behind each other's flushes, and so does every lock they hold meanwhile (measured: ten
connections queued on one Tool's admission lock at 50 callers; completions waiting on each other
at 12 ms per one-task run). So admissions and completions commit without a NOTIFY, and what they
committed is announced afterwards:

- a task left ready wakes this process's executors directly; only when none of them has a free
  slot of its class is a NOTIFY sent, in a statement of its own, for other processes' executors
  (sending it always made this process's executor claim twice, the second time for nothing);
- a run's end is handed to this process's waiters by the completion itself
  (``runtime.scheduler.outcomes``); waiters of other processes get a NOTIFY, sent by a statement
  that writes nothing (so its commit flushes nothing and the queue lock is brief). A one-statement
  completion of a run with no waiter here sends it in the completion's own round trip, as a
  transaction of its own right after the completion's commit (``runs.complete_at_once``); other
  ends are batched here: those committed while one such statement is in flight go out together
  in the next. An end handed to a waiter of this process is not notified at all
  (runtime.scheduler.service says why); a second waiter elsewhere then reads the run at its next
  poll.

NOTIFY is only a wake-up: one lost (a crash right after the commit) costs an executor's or a
waiter's poll interval, never a task or a result.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from datetime import datetime
from typing import Protocol

from runtime.scheduler.models import ClaimedTask, LeaseState
from runtime.scheduler.store import queue
from runtime.store import Database, PerDatabase

log = logging.getLogger(__name__)


class Reservation(Protocol):
    """A free slot of a local executor kept for a task inserted claimed by its worker."""

    worker_id: str
    lease_ms: int
    overrun_ms: int

    def adopt(self, task: ClaimedTask, lease: LeaseState) -> None:
        """Run the task claimed for the slot."""
        ...

    def release(self) -> None:
        """Give the slot back unused."""
        ...


class LocalExecutor(Protocol):
    """What announcing needs of an executor running in this process."""

    @property
    def alive(self) -> bool:
        """Started, claiming and not stopped."""
        ...

    def free_slots(self, execution_class: str) -> int:
        """Slots it could fill with a task of the class right now."""
        ...

    def wake(self) -> None:
        """Make its claim loop claim again now."""
        ...

    def wake_at(self, when: datetime) -> None:
        """Make its claim loop claim again at when (a parked task becomes available then)."""
        ...

    def reserve(self, execution_class: str) -> Reservation | None:
        """Keep a free slot of the class for a task inserted claimed (None: none free)."""
        ...


# The executors running in this process (each registers itself while it runs).
_LOCAL: weakref.WeakSet[LocalExecutor] = weakref.WeakSet()
# Announcements in flight: kept so none is garbage-collected before it ran.
_PENDING: set[asyncio.Task[None]] = set()


def register(executor: LocalExecutor) -> None:
    """Wake executor for tasks committed by this process from now on."""
    _LOCAL.add(executor)


def unregister(executor: LocalExecutor) -> None:
    """Stop waking executor (it stopped)."""
    _LOCAL.discard(executor)


def executors_here() -> bool:
    """Whether an executor runs in this process (a `serve --no-workers` process has none)."""
    return any(executor.alive for executor in list(_LOCAL))


def wake_local_executors(execution_class: str) -> bool:
    """Wake this process's running executors to claim a task just committed here.

    True when one of them has a free slot of the class, so it will claim the task itself.
    """
    room = False
    for executor in list(_LOCAL):
        if executor.alive:
            executor.wake()
            room = room or executor.free_slots(execution_class) > 0
    return room


def expect_task_at(when: datetime) -> None:
    """Wake this process's executors at when, when a task parked here becomes available.

    Other processes' executors learn of it when they next look for the earliest parked task
    (runtime.scheduler.executor: at start, at each such wake and after each idle poll).
    """
    for executor in list(_LOCAL):
        if executor.alive:
            executor.wake_at(when)


def reserve_local_slot(execution_class: str) -> Reservation | None:
    """A free slot of this process's executors for a run's first task, or None.

    An admission passes the slot's worker to the statement that enqueues the run, which inserts
    the task already claimed by it when no ready task waits; the caller then adopts the task
    into the slot, or releases the slot when the task was left ready (or nothing was admitted).
    """
    for executor in list(_LOCAL):
        if executor.alive:
            reservation = executor.reserve(execution_class)
            if reservation is not None:
                return reservation
    return None


def _spawn(task: asyncio.Task[None]) -> None:
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)


async def _notify_task(db: Database, task_id: str) -> None:
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
    _spawn(asyncio.get_running_loop().create_task(_notify_task(db, task_id)))


class _RunEnds:
    """Run ends of one database waiting for their NOTIFY, sent in batches by one sender."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._waiting: list[str] = []
        self._sender: asyncio.Task[None] | None = None

    def add(self, process_id: str) -> None:
        self._waiting.append(process_id)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send())
            _spawn(self._sender)

    async def _send(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                async with self._db.connection() as conn:
                    await queue.notify_runs_ended(conn, batch)
            except Exception as exc:
                # Waiters elsewhere read the run at their next poll.
                log.debug("run-end notification not sent: %s", type(exc).__name__)


_run_ends_of: PerDatabase[_RunEnds] = PerDatabase(_RunEnds)


def announce_run_end(db: Database, process_id: str) -> None:
    """Wake other processes' waiters of a run whose end this process committed (soon)."""
    _run_ends_of(db).add(process_id)
