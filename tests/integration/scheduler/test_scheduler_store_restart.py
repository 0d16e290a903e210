"""A database away for longer than a lease: the live worker keeps its task (issue 42 item 7).

While PostgreSQL is down nobody renews, so every lease runs out; when it is back, the reaper
must not take a task from a worker that is alive and about to confirm a write it already
sent: the worker renews first. The fault is real: this test's own cluster is stopped and
started again under a running executor.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from runtime.scheduler import Executor, SchedulerSettings
from runtime.scheduler.lease import TaskLease
from runtime.scheduler.models import ClaimedTask, NewTask, TaskOutcome
from runtime.store import Database, EmbeddedPostgres, migrate
from tests.support.scheduler import enqueue
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Idempotency And Side Effects")


@pytest.fixture
def own_cluster() -> Iterator[EmbeddedPostgres]:
    """A cluster of this test alone, so stopping it disturbs nobody else."""
    base = Path(tempfile.mkdtemp(prefix="wf-restart-"))
    base.chmod(0o755)
    cluster = EmbeddedPostgres(base / "pg", database="app", fast=True)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
async def own_db(own_cluster: EmbeddedPostgres) -> AsyncIterator[Database]:
    url = own_cluster.url()
    await migrate(url)
    database = Database(url, min_size=1, max_size=4, timeout_s=10.0)
    await database.open()
    try:
        yield database
    finally:
        await database.close()


async def _lease(url: str, process_id: str) -> tuple[str, int, str]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT lease_id::text, attempts, state FROM workflow_task WHERE process_id = %s",
            (process_id,),
        )
        row = await cursor.fetchone()
    assert row is not None
    return (row[0], row[1], row[2])


# The worker holding the task renews as usual and never reaps; the other one reaps often.
HOLDER = SchedulerSettings(
    lease_ms=600, renew_interval_ms=150, reap_interval_ms=600_000, sweep_interval_ms=600_000,
    poll_interval_ms=100, reclaim_min_remaining_ms=100,
)  # fmt: skip
REAPER = SchedulerSettings(
    lease_ms=600, renew_interval_ms=150, reap_interval_ms=50, sweep_interval_ms=600_000,
    poll_interval_ms=100, reclaim_min_remaining_ms=100,
)  # fmt: skip


async def test_a_lease_that_ran_out_while_the_database_was_away_stays_with_its_live_worker(
    own_cluster: EmbeddedPostgres, own_db: Database
) -> None:
    holding = asyncio.Event()
    go_on = asyncio.Event()
    runs: list[str] = []
    url = own_cluster.url()
    # The holder's own pool: one connection, which its running task keeps (as a task in
    # the middle of a ledger write does), so it renews only once that write is done.
    holder_db = Database(url, min_size=1, max_size=1, timeout_s=10.0)
    await holder_db.open()

    async def hold(task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
        runs.append(task.task_id)
        holding.set()
        async with lease.database.connection():
            await go_on.wait()
        return TaskOutcome.finish_run({"done": True})

    async def idle(task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
        runs.append(task.task_id)
        return TaskOutcome.finish_run({"by": "reaper"})

    host = str(uuid.uuid4())
    pid = await enqueue(own_db, host_id=host, first_task=NewTask("hold", {}))
    try:
        async with Executor(holder_db, {"hold": hold}, HOLDER):
            async with asyncio.timeout(30):
                await holding.wait()
            async with Executor(own_db, {"hold": idle}, REAPER):
                lease = await _lease(url, pid)
                await asyncio.to_thread(own_cluster.stop)
                # Away for more than a lease: every lease has run out when it is back.
                await asyncio.sleep(1.2)
                await asyncio.to_thread(own_cluster.start)
                # The reaper's pool answers again (its blocked reap went first)...
                async with asyncio.timeout(30):
                    async with own_db.transaction() as conn:
                        await conn.execute("SELECT 1")
                await asyncio.sleep(0.2)
                # ...and the lease is still the live worker's, which has not renewed yet.
                kept = await _lease(url, pid)
                go_on.set()
                await wait_until(
                    lambda: _finished(url, pid), what="the run ended", within_s=20, every_s=0.1
                )
    finally:
        await holder_db.close()
    assert kept == lease
    assert await _state(url, pid) == "COMPLETED"


async def _state(url: str, process_id: str) -> str:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT state FROM workflow_process WHERE process_id = %s", (process_id,)
        )
        row = await cursor.fetchone()
    assert row is not None
    return str(row[0])


async def _finished(url: str, process_id: str) -> bool:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT state FROM workflow_process WHERE process_id = %s", (process_id,)
        )
        row = await cursor.fetchone()
    return row is not None and row[0] not in ("ACCEPTED", "RUNNING", "WAITING")
