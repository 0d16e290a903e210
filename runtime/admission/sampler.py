"""The queue sampler of deadline-aware admission: one cheap read per interval, per process.

It reads on a connection of its own: under overload the request pool is exactly what is
contended, and a sampler waiting there would let its samples go stale just when they matter.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from dataclasses import dataclass, field

from runtime.admission.controller import CapacityEstimator
from runtime.admission.prediction import ClassLoad
from runtime.cancellation import reraise_if_cancelled
from runtime.scheduler.probe import read_class_load
from runtime.store import Database
from runtime.telemetry import metrics

log = logging.getLogger(__name__)


async def sample_once(db: Database, estimator: CapacityEstimator) -> bool:
    """Read the queue and hand it to this process's estimator; whether it was empty."""
    load = {
        name: ClassLoad(
            ready=row.ready, running=row.running, oldest_ready_ms=float(row.oldest_ready_ms)
        )
        for name, row in (await read_class_load(db)).items()
    }
    estimator.record_sample(load)
    metrics.record_queue({name: (c.ready, c.oldest_ready_ms) for name, c in load.items()})
    return all(c.ready == 0 and c.running == 0 for c in load.values())


@dataclass
class CapacitySampler:
    """A background job sampling the queue every interval on its own one-connection pool.

    While the queue is empty it reads it every idle interval instead, until a call reaches
    this process's admission (the estimator's on_activity: read at the next tick) or a read
    finds work. It never reads more often than once per interval.
    """

    estimator: CapacityEstimator
    conninfo: str
    runtime_role: str | None
    interval_s: float
    idle_interval_s: float | None = None
    name: str = "sample-capacity"
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _idle: bool = field(default=False, init=False)
    _woken: bool = field(default=False, init=False)

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
        # The loop ticks every interval whatever the queue (the lag it measures is the event
        # loop's, worth knowing on an idle service too); only the reads slow down when idle.
        last_read = -math.inf
        try:
            await db.open(wait=False)
            while True:
                if self._due(loop.time() - last_read):
                    last_read = loop.time()
                    self._woken = False
                    idle = False
                    try:
                        idle = await sample_once(db, self.estimator)
                        healthy = True
                    except Exception as exc:
                        reraise_if_cancelled(exc)
                        # Once per outage, type only: admission stops shedding on stale samples.
                        if healthy:
                            log.warning("capacity sampling failed: %s", type(exc).__name__)
                        healthy = False
                    self._idle = idle and self.idle_interval_s is not None
                    self.estimator.on_activity = self._wake if self._idle else None
                asleep = loop.time()
                await asyncio.sleep(self.interval_s)
                lag_s = max(0.0, loop.time() - asleep - self.interval_s)
                self.estimator.record_loop_lag(lag_s)
                metrics.EVENT_LOOP_LAG_SECONDS.observe(lag_s)
        finally:
            self.estimator.on_activity = None
            await db.close()

    def _due(self, since_read_s: float) -> bool:
        """Whether this tick reads the queue: always while busy; idle, at the idle interval or
        at the first tick after a call reached admission here."""
        if not self._idle or self._woken or self.idle_interval_s is None:
            return True
        return since_read_s >= self.idle_interval_s - self.interval_s / 2

    def _wake(self) -> None:
        self._woken = True
