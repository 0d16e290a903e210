"""The admission sampler reads an empty queue at its idle interval, and a call wakes it at once.

An idle service used to read the queue twenty times a second; it reads it at
`idle_sample_interval_ms` while the queue is empty, at `sample_interval_ms` while there is work
or calls arrive. The idle interval here is a minute, so a sample inside the bounded waits below
can only come from the fast interval or a wake.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from runtime.admission import CapacitySettings
from runtime.admission.controller import CapacityEstimator
from runtime.admission.prediction import ClassLoad
from runtime.admission.sampler import CapacitySampler
from runtime.scheduler.models import NewTask
from runtime.store import Database
from tests.conftest import RUNTIME_ROLE
from tests.support.scheduler import enqueue
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Capacity And Availability")

INTERVAL_S = 0.02
IDLE_S = 60.0


class CountingEstimator(CapacityEstimator):
    """An estimator that counts the samples it is handed."""

    samples: int = 0

    def record_sample(self, load: dict[str, ClassLoad], at: float | None = None) -> None:
        self.samples += 1
        super().record_sample(load, at)


@asynccontextmanager
async def sampling(database_url: str) -> AsyncIterator[CountingEstimator]:
    estimator = CountingEstimator()
    sampler = CapacitySampler(estimator, database_url, RUNTIME_ROLE, INTERVAL_S, IDLE_S)
    sampler.start()
    try:
        await wait_until(lambda: estimator.samples >= 1, what="the first sample")
        yield estimator
    finally:
        await sampler.stop()


async def test_an_idle_sampler_waits_its_idle_interval_and_a_call_wakes_it(
    database_url: str,
) -> None:
    async with sampling(database_url) as estimator:
        # Fifty fast intervals: at twenty a second, an idle service read the queue each time.
        await asyncio.sleep(50 * INTERVAL_S)
        assert estimator.samples == 1
        # A call reaching admission (its pre-transaction check) wakes the sampler at once.
        estimator.check_invoke(str(uuid.uuid4()), str(uuid.uuid4()), None, estimator.now())
        await wait_until(lambda: estimator.samples >= 2, what="a sample after the call")
        # A run admitted here (workflow_start counts it) does too.
        estimator.count_admitted("interactive")
        await wait_until(lambda: estimator.samples >= 3, what="a sample after the admission")


async def test_a_sampler_that_finds_work_samples_at_its_interval(
    database_url: str, db: Database
) -> None:
    await enqueue(db, host_id=str(uuid.uuid4()), first_task=NewTask("echo", {}))
    async with sampling(database_url) as estimator:
        await wait_until(lambda: estimator.samples >= 10, what="ten samples of a busy queue")
        assert estimator.load["interactive"].ready == 1


async def test_calls_arriving_one_after_another_never_sample_faster_than_the_interval(
    database_url: str,
) -> None:
    async with sampling(database_url) as estimator:
        start = estimator.now()
        for _ in range(200):
            estimator.check_invoke(str(uuid.uuid4()), str(uuid.uuid4()), None, estimator.now())
            await asyncio.sleep(INTERVAL_S / 10)
        elapsed = estimator.now() - start
        # One sample per call would be about 200; one per interval at most, plus the first.
        assert estimator.samples <= elapsed / INTERVAL_S + 2


@pytest.mark.parametrize(
    "fields",
    [
        {"sample_interval_ms": 50, "idle_sample_interval_ms": 20},
        {"stale_after_ms": 1000, "idle_sample_interval_ms": 2000},
    ],
)
def test_an_idle_interval_outside_the_interval_and_the_staleness_bound_is_refused(
    fields: dict[str, Any],
) -> None:
    with pytest.raises(ValueError, match="idle_sample_interval_ms"):
        CapacitySettings(**fields)
