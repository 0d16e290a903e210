"""What the queue tells admission: the executor's measurements as they happen, the load on demand.

The scheduler is the durable queue and nothing else; deadline-aware admission
(runtime.admission) decides from what the queue reports here. Admission implements QueueProbe
and hands it to the executor of its process, which calls it on each claim round trip, each
task it starts and each job it ends; admission's sampler reads the shared queue's load with
read_class_load. The scheduler never imports admission.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

import msgspec

from runtime.scheduler.models import ClaimedTask
from runtime.scheduler.store.sql import QUERIES
from runtime.store import Database, fetch_all


class QueueProbe(Protocol):
    """Receives what one executor of this process measures (every method is O(1), no I/O)."""

    def claimed(self, seconds: float) -> None:
        """One claim round trip of the executor took seconds."""
        ...

    def started(self, task: ClaimedTask) -> None:
        """The executor started task (claimed after waiting task.sojourn_ms in the queue)."""
        ...

    def job_done(self, execution_class: str, seconds: float) -> None:
        """A job (a claimed run's chained tasks) of the class ended seconds after its claim."""
        ...


class NoProbe:
    """A probe that listens to nothing: an executor with no admission in its process."""

    def claimed(self, seconds: float) -> None:
        """Ignored."""

    def started(self, task: ClaimedTask) -> None:
        """Ignored."""

    def job_done(self, execution_class: str, seconds: float) -> None:
        """Ignored."""


class ClassLoadRow(msgspec.Struct, frozen=True):
    """One execution class in the shared queue: ready and running tasks, the oldest ready age."""

    execution_class: str
    ready: int
    running: int
    # numeric arrives as Decimal.
    oldest_ready_ms: Decimal


async def read_class_load(db: Database) -> dict[str, ClassLoadRow]:
    """Ready and running tasks per execution class in the shared queue (one cheap read)."""
    async with db.connection() as conn:
        rows = await fetch_all(conn, QUERIES["sample_class_load"], {}, ClassLoadRow)
    return {row.execution_class: row for row in rows}
