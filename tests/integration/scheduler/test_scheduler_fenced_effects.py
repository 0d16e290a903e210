"""A reclaimed lease can never lead two workers to dispatch the same write."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from runtime.errors import WorkflowError
from runtime.scheduler import maintenance, service
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.models import NewTask, SchedulerSettings
from runtime.scheduler.store import queue
from runtime.store import Database
from tests.support.scheduler import enqueue
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Idempotency And Side Effects")

SETTINGS = SchedulerSettings()


async def _claim(db: Database, worker: str) -> Any:
    async with db.transaction() as conn:
        [(_, lease)] = await queue.claim_tasks(
            conn, queue.ClaimRequest(worker, 4, 0, 0, 0), SETTINGS
        )
    return lease


async def _mark(db: Database, lease: Any) -> str:
    try:
        await service.mark_effect_possible(db, lease, 1)
    except LeaseLost:
        return "lease lost"
    except WorkflowError:
        return "refused"
    return "dispatched"


async def _expire(admin: psycopg.AsyncConnection[Any], lease: Any) -> None:
    await admin.execute(
        "UPDATE workflow_task SET lease_expires_ts = now() - interval '1 second',"
        " heartbeat_ts = now() - interval '1 minute' WHERE task_id = %s",
        (lease.task_id,),
    )


async def _waits_on_a_lock(admin: psycopg.AsyncConnection[Any]) -> bool:
    """Whether a session of this test's database is waiting for a lock."""
    cursor = await admin.execute(
        "SELECT count(*) AS waiting FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
        " WHERE NOT l.granted AND a.datname = current_database()"
    )
    row = await cursor.fetchone()
    return bool(row and row["waiting"])


@pytest.fixture
async def admin(database_url: str) -> Any:
    conn = await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    )
    yield conn
    await conn.close()


async def test_a_stale_worker_waiting_on_the_run_row_and_the_new_owner_never_both_dispatch(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    host = str(uuid.uuid4())
    process_id = await enqueue(db, host_id=host, first_task=NewTask("write", {}))
    old = await _claim(db, "old")
    await _expire(admin, old)
    blocker = await psycopg.AsyncConnection.connect(database_url)
    try:
        # Someone holds the run row (a cancel check, a deadline sweep) while the old worker,
        # whose lease just expired, tries to mark its write.
        await blocker.execute(
            "SELECT 1 FROM workflow_process WHERE process_id = %s FOR UPDATE", (process_id,)
        )
        old_mark = asyncio.create_task(_mark(db, old))
        await wait_until(
            lambda: old_mark.done() or _waits_on_a_lock(admin),
            what="the old worker's mark reaching the busy run row",
        )
        # The reaper does not race a task whose run row is busy.
        assert (await maintenance.reap_expired_once(db, SETTINGS)).reclaimed == 0
        await blocker.commit()
        old_result = await old_mark
    finally:
        await blocker.close()
    # Only now can the expired lease be reclaimed and the task claimed again.
    assert (await maintenance.reap_expired_once(db, SETTINGS)).reclaimed == 1
    new = await _claim(db, "new")
    assert new.fencing_token > old.fencing_token
    new_result = await _mark(db, new)
    assert [old_result, new_result].count("dispatched") == 1, (old_result, new_result)


async def test_a_mark_of_a_reclaimed_lease_marks_nothing(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    host = str(uuid.uuid4())
    await enqueue(db, host_id=host, first_task=NewTask("write", {}))
    old = await _claim(db, "old")
    await _expire(admin, old)
    assert (await maintenance.reap_expired_once(db, SETTINGS)).reclaimed == 1
    new = await _claim(db, "new")
    assert await _mark(db, old) == "lease lost"
    assert await _mark(db, new) == "dispatched"


async def test_a_possible_step_of_another_claim_is_not_taken_over_by_a_plain_task(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    host = str(uuid.uuid4())
    await enqueue(db, host_id=host, first_task=NewTask("write", {}))
    old = await _claim(db, "old")
    assert await _mark(db, old) == "dispatched"
    await _expire(admin, old)
    assert (await maintenance.reap_expired_once(db, SETTINGS)).reclaimed == 1
    new = await _claim(db, "new")
    assert await _mark(db, new) == "refused"
    # An idempotent task may repeat its call, so it may take the step over.
    await service.mark_effect_possible(db, new, 1, takeover=True)
