"""Stopping an executor never waits for ever, and an overrun names where the task was stuck."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from runtime.scheduler.executor import _finish_or_cancel


async def _stuck_in_a_lock_wait() -> None:
    await asyncio.Event().wait()


async def _ignoring_cancellation(release: asyncio.Event) -> None:
    while not release.is_set():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.01)


async def test_a_task_that_overruns_the_grace_is_cancelled_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quick = asyncio.create_task(asyncio.sleep(0))
    stuck = asyncio.create_task(_stuck_in_a_lock_wait())
    await _finish_or_cancel([quick, stuck], 0.05, "a running task")
    assert quick.done() and not quick.cancelled()
    assert stuck.cancelled()
    [warning] = [r.getMessage() for r in caplog.records if "overran" in r.getMessage()]
    assert "a running task overran" in warning
    assert "_stuck_in_a_lock_wait" in warning


async def test_a_task_that_ignores_its_cancellation_is_reported_and_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()
    stubborn = asyncio.create_task(_ignoring_cancellation(release))
    await _finish_or_cancel([stubborn], 0.05, "the claim loop")
    assert not stubborn.done()
    assert any("ignored its cancellation" in r.getMessage() for r in caplog.records)
    release.set()
    await stubborn
