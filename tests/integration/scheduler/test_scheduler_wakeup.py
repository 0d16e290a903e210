"""What is committed without a NOTIFY is announced: tasks to executors, run ends to waiters.

workflow_invoke's admission commits without a NOTIFY (a notifying commit holds PostgreSQL's
notification-queue lock, and so the Tool's admission lock, through its WAL flush); these tests
pin what runtime.scheduler.announce_task does instead.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime.scheduler import Executor, announce_task, service, wakeup
from runtime.scheduler.models import (
    BudgetAmounts,
    LeaseState,
    NewTask,
    RunSnapshot,
    SchedulerSettings,
    Successor,
    TaskOutcome,
)
from runtime.scheduler.outcomes import HUB
from runtime.scheduler.store import queue
from runtime.scheduler.store.listener import (
    TASK_READY_CHANNEL,
    NotificationListener,
    process_state_channels,
)
from runtime.store import Database
from tests.support.scheduler import enqueue
from tests.support.waiting import wait_until

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


MARKER = {"type": "marker"}


async def _settle(db: Database, heard: list[dict[str, Any] | None]) -> None:
    # A positive signal instead of a pause: once the announcements in flight are done, a marker
    # NOTIFY is sent; PostgreSQL delivers notifications in commit order, so when the marker has
    # arrived every notification sent before it has too. The marker is then taken out again.
    await wait_until(lambda: not wakeup._PENDING, what="the announcements in flight")
    async with db.connection() as conn:
        await conn.execute("SELECT pg_notify(%s, %s)", (TASK_READY_CHANNEL, json.dumps(MARKER)))
    await wait_until(lambda: MARKER in heard, what="the marker notification")
    assert heard.count(MARKER) == 1 and heard[-1] == MARKER
    heard.remove(MARKER)


async def test_without_a_local_executor_the_task_is_notified_to_other_processes(
    db: Database, heard: list[dict[str, Any] | None]
) -> None:
    announce_task(db, TASK_ID, "interactive")
    await _settle(db, heard)
    assert heard == [{"type": "task", "id": TASK_ID}]


async def test_a_local_executor_with_room_is_woken_and_nothing_is_notified(
    db: Database, heard: list[dict[str, Any] | None]
) -> None:
    async with Executor(db, {}, QUIET) as executor:
        # Its first claim (finding nothing) done, it waits for a wake-up.
        await wait_until(lambda: executor.idle, what="the executor's first claim")
        await _settle(db, heard)
        heard.clear()
        announce_task(db, TASK_ID, "interactive")
        # Woken at once, without the round trip through the database.
        assert not executor.idle
        await _settle(db, heard)
    assert heard == []


async def test_a_local_executor_without_room_lets_other_processes_hear_of_the_task(
    db: Database, heard: list[dict[str, Any] | None]
) -> None:
    no_interactive = SchedulerSettings(
        poll_interval_ms=60_000, interactive_slots=0, standard_slots=1, borrow_slots=0
    )
    async with Executor(db, {}, no_interactive):
        await _settle(db, heard)
        heard.clear()
        announce_task(db, TASK_ID, "interactive")
        await _settle(db, heard)
    assert heard == [{"type": "task", "id": TASK_ID}]


# --- What a completion committed (migration 0018: no NOTIFY inside the completing commit) ---

BUDGET = BudgetAmounts(
    attempts=5, nested_calls=5, request_bytes=100, intermediate_bytes=100, result_bytes=100,
    cost_units=10,
)  # fmt: skip


@pytest.fixture
async def ends_heard(database_url: str) -> AsyncIterator[list[dict[str, Any] | None]]:
    """The run-end notifications a waiter of another process would hear."""
    payloads: list[dict[str, Any] | None] = []
    listener = NotificationListener(database_url, process_state_channels(0, 1), payloads.append)
    await listener.start()
    try:
        yield payloads
    finally:
        await listener.close()


async def _claimed_run(db: Database) -> LeaseState:
    await enqueue(db, host_id=str(uuid.uuid4()), first_task=NewTask("echo", {}), budget=BUDGET)
    async with db.connection() as conn:
        [(_, lease)] = await queue.claim_tasks(conn, queue.ClaimRequest("w1", 8, 2, 2, 0), QUIET)
    return lease


async def test_a_run_ended_by_a_completion_is_notified_to_other_processes_once_committed(
    db: Database, ends_heard: list[dict[str, Any] | None]
) -> None:
    lease = await _claimed_run(db)
    await service.complete(db, lease, TaskOutcome.finish_run({"ok": True}))
    expected = {"type": "process", "id": lease.process_id}
    await wait_until(lambda: expected in ends_heard, what="the run's end notification")
    run = await service.get_process(db, lease.host_id, lease.process_id)
    assert run is not None and run.state == "COMPLETED"
    assert ends_heard.count(expected) == 1


async def test_run_ends_committed_together_are_all_notified_each_once(
    db: Database, ends_heard: list[dict[str, Any] | None]
) -> None:
    leases = [await _claimed_run(db) for _ in range(12)]
    await asyncio.gather(
        *(service.complete(db, lease, TaskOutcome.finish_run({})) for lease in leases)
    )
    expected = [{"type": "process", "id": lease.process_id} for lease in leases]
    await wait_until(
        lambda: all(item in ends_heard for item in expected), what="every run's end notification"
    )
    assert sorted(p["id"] for p in ends_heard if p) == sorted(x["id"] for x in expected)


async def test_a_next_task_a_completion_left_ready_is_announced_to_other_processes(
    db: Database, heard: list[dict[str, Any] | None]
) -> None:
    lease = await _claimed_run(db)
    # Ready work waits elsewhere, so the completion leaves its next task ready (not claimed).
    await enqueue(db, host_id=str(uuid.uuid4()), first_task=NewTask("echo", {}), budget=BUDGET)
    # Both runs' first tasks were notified by their own commits: hear those out first.
    await wait_until(lambda: len(heard) == 2, what="the first tasks' notifications")
    heard.clear()
    successor = Successor("w1", lease_ms=5_000)
    completion = await service.complete(db, lease, TaskOutcome.then(NewTask("echo")), successor)
    assert completion.successor is None and completion.backlog
    await wait_until(lambda: len(heard) == 1, what="the next task's notification")
    async with db.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT task_id::text AS id FROM workflow_task"
                " WHERE process_id = %s AND step_no = 1",
                (lease.process_id,),
            )
        ).fetchone()
    assert row is not None and heard == [{"type": "task", "id": row["id"]}]


async def test_a_run_end_handed_to_a_waiter_of_this_process_is_not_notified(
    db: Database, ends_heard: list[dict[str, Any] | None]
) -> None:
    lease = await _claimed_run(db)
    handed: list[RunSnapshot | None] = []
    unsubscribe = HUB.subscribe(lease.process_id, handed.append)
    try:
        await service.complete(db, lease, TaskOutcome.finish_run({"ok": True}))
    finally:
        unsubscribe()
    assert handed and handed[0] is not None and handed[0].state == "COMPLETED"
    # Ordered after anything the completion could have sent: the marker is heard alone.
    await _settle_ends(db, ends_heard)
    assert ends_heard == []


async def _settle_ends(db: Database, heard: list[dict[str, Any] | None]) -> None:
    await wait_until(lambda: not wakeup._PENDING, what="the announcements in flight")
    channel = process_state_channels(0, 1)[0]
    async with db.connection() as conn:
        await conn.execute("SELECT pg_notify(%s, %s)", (channel, json.dumps(MARKER)))
    await wait_until(lambda: MARKER in heard, what="the marker notification")
    heard.remove(MARKER)
