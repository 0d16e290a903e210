"""The queue sampler of deadline-aware admission: one cheap read per interval, per process.

It reads on a connection of its own: under overload the request pool is exactly what is
contended, and a sampler waiting there would let its samples go stale just when they matter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from decimal import Decimal

import msgspec

from runtime.cancellation import reraise_if_cancelled
from runtime.scheduler import capacity
from runtime.scheduler.capacity import ClassLoad
from runtime.scheduler.store.sql import QUERIES
from runtime.store import Database, fetch_all
from runtime.telemetry import metrics

log = logging.getLogger(__name__)


class ClassLoadRow(msgspec.Struct, frozen=True):
    """One execution class's row of sample_class_load (numeric arrives as Decimal)."""

    execution_class: str
    ready: int
    running: int
    oldest_ready_ms: Decimal


async def read_class_load(db: Database) -> dict[str, ClassLoad]:
    """Ready and running tasks per execution class in the shared queue."""
    async with db.connection() as conn:
        rows = await fetch_all(conn, QUERIES["sample_class_load"], {}, ClassLoadRow)
    return {
        row.execution_class: ClassLoad(
            ready=row.ready, running=row.running, oldest_ready_ms=float(row.oldest_ready_ms)
        )
        for row in rows
    }


async def sample_once(db: Database) -> None:
    """Read the queue and hand it to this process's estimator."""
    load = await read_class_load(db)
    capacity.ESTIMATOR.record_sample(load)
    metrics.record_queue({name: (c.ready, c.oldest_ready_ms) for name, c in load.items()})


@dataclass
class CapacitySampler:
    """A background job sampling the queue every interval on its own one-connection pool."""

    conninfo: str
    runtime_role: str | None
    interval_s: float
    name: str = "sample-capacity"
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self) -> None:
        """Start sampling (the connection opens in the background)."""
        self._task = asyncio.create_task(self._loop(), name=f"job:{self.name}")

    async def stop(self) -> None:
        """Stop sampling and close the connection."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        db = Database(
            self.conninfo,
            runtime_role=self.runtime_role,
            min_size=1,
            max_size=1,
            name=self.name,
            timeout_s=max(1.0, self.interval_s * 10),
        )
        healthy = True
        loop = asyncio.get_running_loop()
        try:
            await db.open(wait=False)
            while True:
                try:
                    await sample_once(db)
                    healthy = True
                except Exception as exc:
                    reraise_if_cancelled(exc)
                    # Once per outage, type only: admission stops shedding on stale samples.
                    if healthy:
                        log.warning("capacity sampling failed: %s", type(exc).__name__)
                    healthy = False
                asleep = loop.time()
                await asyncio.sleep(self.interval_s)
                lag_s = max(0.0, loop.time() - asleep - self.interval_s)
                capacity.ESTIMATOR.record_loop_lag(lag_s)
                metrics.EVENT_LOOP_LAG_SECONDS.observe(lag_s)
        finally:
            await db.close()
