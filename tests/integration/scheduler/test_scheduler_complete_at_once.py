"""A task's completion as one statement (workflow_complete_task): fenced, all or nothing."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from runtime.errors import WorkflowError
from runtime.scheduler import maintenance, service
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.models import (
    BudgetAmounts,
    ClaimedTask,
    LeaseState,
    NewTask,
    RunSnapshot,
    SchedulerSettings,
    Successor,
    TaskOutcome,
)
from runtime.scheduler.outcomes import HUB
from runtime.scheduler.store import queue, runs
from runtime.store import Database, StoreUnavailable
from tests.conftest import RUNTIME_ROLE
from tests.support.scheduler import enqueue

SETTINGS = SchedulerSettings()
BUDGET = BudgetAmounts(
    attempts=5, nested_calls=5, request_bytes=100, intermediate_bytes=100, result_bytes=100,
    cost_units=10,
)  # fmt: skip


@pytest.fixture
async def admin(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """An autocommit connection as the schema owner, to arrange rows and inspect them."""
    conn = await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    )
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """The runtime role's pool, full before the test starts.

    The shared fixture's pool starts with one connection and opens more when asked, each with
    a `SET ROLE` of its own: opened while statements are counted, that is a statement the
    completion never sent (seen under two test workers).
    """
    pool = Database(database_url, runtime_role=RUNTIME_ROLE, min_size=4, max_size=4)
    async with pool as database:
        yield database


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Counter[str]:
    """Counts of statements executed and transactions opened on the test's database.

    Only this database's connections count: the event loop is the session's, and work an
    earlier test left running (a poll, an announcement) talks to that test's database.
    """
    counts: Counter[str] = Counter()
    dbname = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    # Every statement goes through a cursor's execute (a connection's execute opens one).
    execute = psycopg.AsyncCursor.execute
    transaction = psycopg.AsyncConnection.transaction
    pipeline = psycopg.AsyncConnection.pipeline

    def count(conn: psycopg.AsyncConnection[Any], what: str) -> None:
        if conn.info.dbname == dbname:
            counts[what] += 1

    async def counting_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        count(self.connection, "execute")
        return await execute(self, *args, **kwargs)

    def counting_transaction(self: Any, *args: Any, **kwargs: Any) -> Any:
        count(self, "transaction")
        return transaction(self, *args, **kwargs)

    def counting_pipeline(self: Any, *args: Any, **kwargs: Any) -> Any:
        count(self, "pipeline")
        return pipeline(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counting_execute)
    monkeypatch.setattr(psycopg.AsyncConnection, "transaction", counting_transaction)
    monkeypatch.setattr(psycopg.AsyncConnection, "pipeline", counting_pipeline)
    return counts


async def started(db: Database, **kwargs: Any) -> tuple[str, str, ClaimedTask, LeaseState]:
    host_id = str(uuid.uuid4())
    process_id = await enqueue(
        db, host_id=host_id, first_task=NewTask("echo", {"n": 1}), budget=BUDGET, **kwargs
    )
    async with db.transaction() as conn:
        [(task, lease)] = await queue.claim_tasks(
            conn, queue.ClaimRequest("w1", 4, 2, 2, 0), SETTINGS
        )
    return host_id, process_id, task, lease


async def rows(admin: psycopg.AsyncConnection[Any], process_id: str) -> dict[str, Any]:
    """Everything a completion may write: the run, its budget and its tasks."""
    run = await (
        await admin.execute(
            "SELECT state, result, error, finished_ts FROM workflow_process WHERE process_id = %s",
            (process_id,),
        )
    ).fetchone()
    budget = await (
        await admin.execute(
            "SELECT remaining_attempts, remaining_cost_units FROM workflow_budget"
            " WHERE process_id = %s",
            (process_id,),
        )
    ).fetchone()
    tasks = await (
        await admin.execute(
            "SELECT task_id, state, result, lease_id, fencing_token FROM workflow_task"
            " WHERE process_id = %s ORDER BY step_no",
            (process_id,),
        )
    ).fetchall()
    return {"run": run, "budget": budget, "tasks": tasks}


async def test_a_one_task_runs_completion_is_one_statement_and_no_transaction(
    db: Database, round_trips: Counter[str]
) -> None:
    host_id, process_id, _, lease = await started(db)
    round_trips.clear()
    outcome = TaskOutcome.finish_run({"ok": True}, consume=BudgetAmounts(cost_units=3))
    # The call that admitted the run waits in this process (the common case): no NOTIFY.
    handed: list[RunSnapshot | None] = []
    unsubscribe = HUB.subscribe(process_id, handed.append)
    try:
        completion = await service.complete(db, lease, outcome)
    finally:
        unsubscribe()
    assert round_trips == Counter(execute=1)
    assert handed and handed[0] is not None and handed[0].state == "COMPLETED"
    assert completion.successor is None
    run = await service.get_process(db, host_id, process_id)
    assert run is not None
    assert (run.state, run.result, run.remaining_cost_units) == (
        "COMPLETED",
        {"ok": True},
        7,
    )
    assert run.finished_ts is not None


async def test_a_run_with_no_waiter_here_has_its_end_notified_in_the_completions_round_trip(
    db: Database, database_url: str, round_trips: Counter[str]
) -> None:
    _, process_id, _, lease = await started(db)
    listener = await psycopg.AsyncConnection.connect(database_url, autocommit=True)
    try:
        await listener.execute(f"LISTEN workflow_process_state_{process_id[-1]}")
        round_trips.clear()
        await service.complete(db, lease, TaskOutcome.finish_run({"ok": True}))
        # One pipeline: the completion, then the NOTIFY in a transaction of its own; nothing is
        # left to send once complete() returns (a later statement would cost a round trip).
        assert round_trips == Counter(pipeline=1, execute=2)
        async with asyncio.timeout(10):
            notify = await anext(listener.notifies())
        assert json.loads(notify.payload) == {"type": "process", "id": process_id}
        assert round_trips == Counter(pipeline=1, execute=2)
    finally:
        await listener.close()


async def test_a_single_successor_is_claimed_by_the_completing_worker_in_the_same_statement(
    db: Database, round_trips: Counter[str]
) -> None:
    _, process_id, _, lease = await started(db)
    round_trips.clear()
    successor = Successor("w1", lease_ms=5_000)
    completion = await service.complete(db, lease, TaskOutcome.then(NewTask("echo")), successor)
    assert round_trips == Counter(execute=1)
    assert completion.successor is not None and not completion.backlog
    task, fresh = completion.successor
    assert (task.process_id, task.step_no, task.attempts) == (process_id, 1, 1)
    assert fresh.fencing_token > lease.fencing_token
    # The claimed successor completes under its own fresh lease, through the same statement.
    await service.complete(db, fresh, TaskOutcome.finish_run({"steps": 2}))


async def test_a_stale_fencing_token_writes_nothing_and_raises_lease_lost(
    db: Database, admin: psycopg.AsyncConnection[Any], round_trips: Counter[str]
) -> None:
    _, process_id, _, stale = await started(db)
    await admin.execute(
        "UPDATE workflow_task SET lease_expires_ts = now() - interval '1 second',"
        " heartbeat_ts = now() - interval '1 minute' WHERE task_id = %s",
        (stale.task_id,),
    )
    assert (await maintenance.reap_expired_once(db, SETTINGS)).reclaimed == 1
    async with db.transaction() as conn:
        [(_, fresh)] = await queue.claim_tasks(conn, queue.ClaimRequest("w2", 4, 2, 2, 0), SETTINGS)
    before = await rows(admin, process_id)
    round_trips.clear()
    outcome = TaskOutcome.finish_run({"by": "stale"}, consume=BudgetAmounts(cost_units=1))
    with pytest.raises(LeaseLost):
        await service.complete(db, stale, outcome)
    with pytest.raises(LeaseLost):
        await service.complete(db, stale, TaskOutcome.then(NewTask("echo")), Successor("w1", 5_000))
    # Each refused in one round trip; the one that would have ended the run had its NOTIFY
    # statement sent with it (nobody is notified: the run is not over).
    assert round_trips == Counter(execute=3, pipeline=1)
    assert await rows(admin, process_id) == before
    await service.complete(db, fresh, TaskOutcome.finish_run({"by": "fresh"}))


async def test_a_refused_completion_announces_no_run_end(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    _, process_id, _, stale = await started(db)
    await admin.execute(
        "UPDATE workflow_task SET fencing_token = fencing_token + 1 WHERE task_id = %s",
        (stale.task_id,),
    )
    channel = f"workflow_process_state_{process_id[-1]}"
    listener = await psycopg.AsyncConnection.connect(database_url, autocommit=True)
    try:
        await listener.execute(f"LISTEN {channel}")
        with pytest.raises(LeaseLost):
            await service.complete(db, stale, TaskOutcome.finish_run({"by": "stale"}))
        # Notifications arrive in commit order: the marker comes first when nothing was sent.
        await admin.execute("SELECT pg_notify(%s, 'marker')", (channel,))
        async with asyncio.timeout(10):
            notify = await anext(listener.notifies())
        assert notify.payload == "marker"
    finally:
        await listener.close()


async def test_an_insufficient_budget_writes_nothing_and_raises_budget_exhausted(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    _, process_id, _, lease = await started(db)
    before = await rows(admin, process_id)
    outcome = TaskOutcome.then(NewTask("echo"), consume=BudgetAmounts(cost_units=11))
    with pytest.raises(WorkflowError) as refused:
        await service.complete(db, lease, outcome)
    assert refused.value.code == "WORKFLOW_BUDGET_EXHAUSTED"
    assert await rows(admin, process_id) == before


async def test_an_answer_lost_after_the_commit_is_repeated_once_and_refused_as_lease_lost(
    db: Database, admin: psycopg.AsyncConnection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, process_id, _, lease = await started(db)
    complete_at_once = runs.complete_at_once
    calls: list[str] = []

    async def answer_lost(*args: Any, **kwargs: Any) -> runs.CompletedAtOnce:
        done = await complete_at_once(*args, **kwargs)
        calls.append(done.outcome)
        if len(calls) == 1:
            raise StoreUnavailable()
        return done

    monkeypatch.setattr(runs, "complete_at_once", answer_lost)
    with pytest.raises(LeaseLost):
        await service.complete(db, lease, TaskOutcome.finish_run({"once": True}))
    # The first try committed; the repeat found the task done and wrote nothing.
    assert calls == ["finished"]
    after = await rows(admin, process_id)
    assert after["run"]["state"] == "COMPLETED" and after["run"]["result"] == {"once": True}
    assert [t["state"] for t in after["tasks"]] == ["done"]


async def test_a_cooperative_cancel_between_steps_ends_the_run_on_the_transaction_path(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id, process_id, _, lease = await started(db, cancellation_policy="cooperative")
    await admin.execute(
        "UPDATE workflow_process SET cancel_requested = true WHERE process_id = %s",
        (process_id,),
    )
    await service.complete(db, lease, TaskOutcome.then(NewTask("echo")), Successor("w1", 5_000))
    run = await service.get_process(db, host_id, process_id)
    assert run is not None and run.state == "CANCELLED"
    assert run.error["code"] == "WORKFLOW_CANCELLED"
    assert [t["state"] for t in (await rows(admin, process_id))["tasks"]] == ["done"]
