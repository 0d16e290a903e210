"""A cancellation hidden by an exception still ends a retry loop (the teardown hang of issue 20).

A side task cancelled in the middle of a statement saw its CancelledError replaced by the
store's StoreUnavailable (the transaction block exits on the broken link), logged it as a failed
step and slept on: the executor's stop, awaiting it, waited for ever.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from runtime.cancellation import cancelled, reraise_if_cancelled
from runtime.scheduler import Executor
from runtime.store.errors import StoreUnavailable

pytestmark = pytest.mark.asyncio


async def test_an_error_that_hides_the_task_s_cancellation_is_raised_as_the_cancellation() -> None:
    started = asyncio.Event()

    async def step() -> None:
        try:
            started.set()
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise StoreUnavailable() from None

    async def loop() -> None:
        while True:
            try:
                await step()
            except Exception as exc:
                reraise_if_cancelled(exc)

    task = asyncio.create_task(loop())
    await started.wait()
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=5)
    assert task in done and task.cancelled()


async def test_an_error_without_a_cancellation_is_left_to_the_handler() -> None:
    assert not cancelled()
    reraise_if_cancelled(StoreUnavailable())  # nothing raised: the caller logs and retries


async def test_an_executor_side_loop_ends_when_cancelled_mid_step_behind_a_store_error() -> None:
    executor = Executor(cast(Any, None), {}, conninfo="dbname=unused")
    calls = 0
    in_step = asyncio.Event()

    async def step() -> None:
        nonlocal calls
        calls += 1
        in_step.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise StoreUnavailable() from None

    side = asyncio.create_task(executor._every(1, step))
    await in_step.wait()
    side.cancel()
    done, _ = await asyncio.wait([side], timeout=5)
    assert side in done and side.cancelled()
    assert calls == 1
