"""A task committed without a NOTIFY is announced: local executors at once, others by NOTIFY.

workflow_invoke's admission commits without a NOTIFY (a notifying commit holds PostgreSQL's
notification-queue lock, and so the Tool's admission lock, through its WAL flush); these tests
pin what runtime.scheduler.announce_task does instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime.scheduler import Executor, announce_task
from runtime.scheduler.models import SchedulerSettings
from runtime.scheduler.store.listener import TASK_READY_CHANNEL, NotificationListener
from runtime.store import Database

QUIET = SchedulerSettings(poll_interval_ms=60_000)
TASK_ID = "00000000-0000-4000-8000-000000000001"


@pytest.fixture
async def heard(database_url: str) -> AsyncIterator[list[dict[str, Any] | None]]:
    """The task-ready notifications another process's executor would hear."""
    payloads: list[dict[str, Any] | None] = []
    listener = NotificationListener(database_url, [TASK_READY_CHANNEL], payloads.append)
    await listener.start()
    try:
        yield payloads
    finally:
        await listener.close()


async def _settle() -> None:
    # Long enough for a NOTIFY sent by a background task to reach a listener on loopback.
    await asyncio.sleep(0.5)


async def test_without_a_local_executor_the_task_is_notified_to_other_processes(
    db: Database, heard: list[dict[str, Any] | None]
) -> None:
    announce_task(db, TASK_ID, "interactive")
    await _settle()
    assert heard == [{"type": "task", "id": TASK_ID}]


async def test_a_local_executor_with_room_is_woken_and_nothing_is_notified(
    db: Database, heard: list[dict[str, Any] | None]
) -> None:
    async with Executor(db, {}, QUIET) as executor:
        await _settle()
        heard.clear()
        assert executor.idle
        announce_task(db, TASK_ID, "interactive")
        # Woken at once, without the round trip through the database.
        assert not executor.idle
        await _settle()
    assert heard == []


async def test_a_local_executor_without_room_lets_other_processes_hear_of_the_task(
    db: Database, heard: list[dict[str, Any] | None]
) -> None:
    no_interactive = SchedulerSettings(
        poll_interval_ms=60_000, interactive_slots=0, standard_slots=1, borrow_slots=0
    )
    async with Executor(db, {}, no_interactive):
        await _settle()
        heard.clear()
        announce_task(db, TASK_ID, "interactive")
        await _settle()
    assert heard == [{"type": "task", "id": TASK_ID}]
