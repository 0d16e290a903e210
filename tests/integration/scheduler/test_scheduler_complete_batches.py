"""Completions that end while another is in flight go as one statement (migration 0085).

With one completion statement in flight per process, the completions behind it wait and then
go together: each is exactly workflow_complete_task (fenced, all or nothing on its own), so a
lost lease or an exhausted budget refuses that completion alone, and a batch whose connection
dies is retried by each of its completions. A task row held by a superuser transaction keeps
the first completion (or the batch) waiting so the others pile up for certain.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from runtime.errors import WorkflowError
from runtime.scheduler import service
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.models import BudgetAmounts, LeaseState, RunSnapshot, TaskOutcome
from runtime.scheduler.outcomes import HUB
from runtime.store import Database
from runtime.telemetry import metrics
from tests.conftest import RUNTIME_ROLE
from tests.integration.scheduler.test_scheduler_complete_at_once import rows, started
from tests.support.waiting import wait_until

Admin = psycopg.AsyncConnection[dict[str, Any]]
BEHIND = 3
BATCH_WAITING = (
    "SELECT pid FROM pg_stat_activity WHERE query LIKE '%%workflow_complete_task_batch(%%'"
    " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """A pool whose completions go one statement at a time (the others wait and batch)."""
    pool = Database(database_url, runtime_role=RUNTIME_ROLE, min_size=4, max_size=8)
    async with pool as database:
        service.use_completion_statements(database, 1)
        yield database


@asynccontextmanager
async def task_held(database_url: str, lease: LeaseState) -> AsyncIterator[None]:
    """The task's row locked by another transaction until the block ends."""
    conn = await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row)
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT 1 FROM workflow_task WHERE task_id = %s FOR UPDATE", (lease.task_id,)
            )
            yield
    finally:
        await conn.close()


async def _row_lock_waiters(admin: Admin) -> int:
    query = (
        "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND wait_event IN ('transactionid', 'tuple')"
    )
    row = await (await admin.execute(query)).fetchone()
    assert row is not None
    return int(row["n"])


class Runs:
    """Started one-task runs, each with a waiter here (so no completion notifies)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.leases: list[LeaseState] = []
        self.handed: dict[str, list[RunSnapshot | None]] = {}
        self._unsubscribe: list[Callable[[], None]] = []

    async def start(self, count: int) -> list[LeaseState]:
        for _ in range(count):
            _, process_id, _, lease = await started(self.db)
            self.leases.append(lease)
            self.handed[process_id] = []
            self._unsubscribe.append(HUB.subscribe(process_id, self.handed[process_id].append))
        return self.leases

    def close(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()


@pytest.fixture
async def runs(db: Database) -> AsyncIterator[Runs]:
    started_runs = Runs(db)
    try:
        yield started_runs
    finally:
        started_runs.close()


def _finish(n: int, cost: int = 1) -> TaskOutcome:
    return TaskOutcome.finish_run({"run": n}, consume=BudgetAmounts(cost_units=cost))


async def _pile(
    db: Database,
    admin: Admin,
    database_url: str,
    leases: list[LeaseState],
    outcomes: list[TaskOutcome],
    then: Callable[[], Awaitable[None]] | None = None,
) -> list[Any]:
    """The first completion waits on its held task; the others wait behind it in the process."""
    calls: list[asyncio.Task[Any]] = []
    async with task_held(database_url, leases[0]):
        calls.append(asyncio.create_task(service.complete(db, leases[0], outcomes[0])))

        async def waiting_on_the_row() -> bool:
            return await _row_lock_waiters(admin) >= 1

        await wait_until(waiting_on_the_row, what="the first completion on the held task")
        for lease, outcome in zip(leases[1:], outcomes[1:], strict=True):
            calls.append(asyncio.create_task(service.complete(db, lease, outcome)))
        await asyncio.sleep(0.05)
        assert not any(call.done() for call in calls)
        if then is not None:
            await then()
    async with asyncio.timeout(30):
        return await asyncio.gather(*calls, return_exceptions=True)


def _batches(calls: int) -> float:
    return metrics.COMPLETION_STATEMENTS.labels(str(calls))._value.get()


async def test_completions_behind_a_busy_one_go_as_one_batch_each_ending_its_own_run(
    db: Database, admin: Admin, database_url: str, runs: Runs
) -> None:
    leases = await runs.start(BEHIND + 1)
    before = _batches(BEHIND)
    outcomes = [_finish(n) for n in range(BEHIND + 1)]
    answers = await _pile(db, admin, database_url, leases, outcomes)
    assert not any(isinstance(answer, BaseException) for answer in answers), answers
    assert _batches(BEHIND) == before + 1
    for n, lease in enumerate(leases):
        stored = await rows(admin, lease.process_id)
        assert stored["run"]["state"] == "COMPLETED" and stored["run"]["result"] == {"run": n}
        assert stored["budget"]["remaining_cost_units"] == 9
        [handed] = runs.handed[lease.process_id]
        assert handed is not None and handed.state == "COMPLETED"


async def test_a_lost_lease_or_an_exhausted_budget_refuses_only_its_own_completion_in_a_batch(
    db: Database, admin: Admin, database_url: str, runs: Runs
) -> None:
    leases = await runs.start(4)
    stale, exhausted = leases[1], leases[2]
    await admin.execute(
        "UPDATE workflow_task SET fencing_token = fencing_token + 1 WHERE task_id = %s",
        (stale.task_id,),
    )
    untouched = {
        lease.process_id: await rows(admin, lease.process_id) for lease in (stale, exhausted)
    }
    outcomes = [_finish(0), _finish(1), _finish(2, cost=11), _finish(3)]
    before = _batches(3)
    answers = await _pile(db, admin, database_url, leases, outcomes)
    assert _batches(3) == before + 1
    assert isinstance(answers[1], LeaseLost)
    assert isinstance(answers[2], WorkflowError)
    assert answers[2].code == "WORKFLOW_BUDGET_EXHAUSTED"
    for process_id, stored in untouched.items():
        assert await rows(admin, process_id) == stored
    for n in (0, 3):
        stored = await rows(admin, leases[n].process_id)
        assert stored["run"]["state"] == "COMPLETED" and stored["run"]["result"] == {"run": n}


async def test_a_batch_whose_connection_dies_is_completed_by_each_completions_retry(
    db: Database, admin: Admin, database_url: str, runs: Runs
) -> None:
    leases = await runs.start(BEHIND + 1)
    outcomes = [_finish(n) for n in range(BEHIND + 1)]

    killed = asyncio.Event()

    async def held_batch() -> None:
        # Once the first completion is let go, the batch behind it waits on this held task.
        async with task_held(database_url, leases[2]):
            async with asyncio.timeout(20):
                while True:
                    row = await (await admin.execute(BATCH_WAITING)).fetchone()
                    if row is not None:
                        break
                    await asyncio.sleep(0.02)
            await admin.execute("SELECT pg_terminate_backend(%s)", (row["pid"],))
            killed.set()
            # Each completion tries again; the one of the held task waits for it once more.
            await asyncio.sleep(0.2)

    holder = asyncio.create_task(held_batch())
    await asyncio.sleep(0.05)
    answers = await _pile(db, admin, database_url, leases, outcomes)
    await holder
    assert killed.is_set()
    assert not any(isinstance(answer, BaseException) for answer in answers), answers
    for n, lease in enumerate(leases):
        stored = await rows(admin, lease.process_id)
        assert stored["run"]["state"] == "COMPLETED" and stored["run"]["result"] == {"run": n}
        assert stored["budget"]["remaining_cost_units"] == 9
