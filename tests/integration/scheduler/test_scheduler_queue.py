"""The queue on real PostgreSQL: fenced claims, fair order, effect and budget ledgers."""

from __future__ import annotations

import asyncio
import uuid
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
    SchedulerSettings,
    TaskOutcome,
)
from runtime.scheduler.store import ledgers, queue, runs
from runtime.store import Database
from tests.support.scheduler import enqueue

SETTINGS = SchedulerSettings()


@pytest.fixture
async def admin(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """An autocommit connection as the schema owner, to arrange time and inspect rows."""
    conn = await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    )
    try:
        yield conn
    finally:
        await conn.close()


def request(
    interactive: int = 4, standard: int = 2, batch: int = 2, borrow: int = 0, worker: str = "w1"
) -> queue.ClaimRequest:
    return queue.ClaimRequest(worker, interactive, standard, batch, borrow)


async def claim(
    db: Database, req: queue.ClaimRequest, settings: SchedulerSettings = SETTINGS
) -> list[tuple[ClaimedTask, LeaseState]]:
    async with db.transaction() as conn:
        return await queue.claim_tasks(conn, req, settings)


async def expire_lease(admin: psycopg.AsyncConnection[Any], task_id: str) -> None:
    await admin.execute(
        "UPDATE workflow_task SET lease_expires_ts = now() - interval '1 second',"
        " heartbeat_ts = now() - interval '1 minute' WHERE task_id = %s",
        (task_id,),
    )


async def start(db: Database, kind: str = "echo", **kwargs: Any) -> tuple[str, str]:
    host_id = kwargs.pop("host_id", str(uuid.uuid4()))
    process_id = await enqueue(db, host_id=host_id, first_task=NewTask(kind, {"n": 1}), **kwargs)
    return host_id, process_id


async def test_a_claim_leases_the_task_and_marks_the_run_running(db: Database) -> None:
    host_id, process_id = await start(db)
    [(task, lease)] = await claim(db, request())
    assert (task.process_id, task.step_no, task.attempts) == (process_id, 0, 1)
    assert lease.fencing_token > 0 and lease.expires_ts <= task.deadline_ts
    run = await service.get_process(db, host_id, process_id)
    assert run is not None and run.state == "RUNNING"
    assert await claim(db, request()) == []


async def test_a_stale_fencing_token_cannot_complete_a_reclaimed_task(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id, process_id = await start(db)
    [(_, stale)] = await claim(db, request())
    await expire_lease(admin, stale.task_id)
    report = await maintenance.reap_expired_once(db, SETTINGS)
    assert report.reclaimed == 1
    [(task, fresh)] = await claim(db, request(worker="w2"))
    assert task.attempts == 2 and fresh.fencing_token > stale.fencing_token

    with pytest.raises(LeaseLost):
        await service.complete(db, stale, TaskOutcome.finish_run({"by": "stale"}))
    await service.complete(db, fresh, TaskOutcome.finish_run({"by": "fresh"}))

    run = await service.get_process(db, host_id, process_id)
    assert run is not None and (run.state, run.result) == ("COMPLETED", {"by": "fresh"})


async def test_lease_lost_is_not_an_exception_that_task_code_can_swallow() -> None:
    assert not issubclass(LeaseLost, Exception)


async def test_the_reaper_times_out_instead_of_reclaiming_when_the_run_cannot_finish(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id, process_id = await start(db, timeout_ms=60_000)
    [(_, lease)] = await claim(db, request())
    await expire_lease(admin, lease.task_id)
    # Less remaining time than a reclaimed attempt needs to be useful.
    await admin.execute(
        "UPDATE workflow_process SET deadline_ts = now() + interval '50 milliseconds'"
        " WHERE process_id = %s",
        (process_id,),
    )
    report = await maintenance.reap_expired_once(db, SETTINGS)
    assert (report.reclaimed, report.timed_out) == (0, 1)
    run = await service.get_process(db, host_id, process_id)
    assert run is not None and run.state == "CANCELLED"
    assert run.error["code"] == "WORKFLOW_TIMEOUT" and run.error["retryable"] is False
    assert await claim(db, request()) == []


async def test_seven_tenants_interactive_tasks_are_claimed_within_two_rounds_despite_a_backlog(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    noisy, backlog = await start(db, execution_class="batch", timeout_ms=3_600_000)
    await admin.execute(
        "INSERT INTO workflow_task (host_id, process_id, step_no, kind, execution_class)"
        " SELECT %s, %s, n, 'echo', 'batch' FROM generate_series(1, 4999) AS n",
        (noisy, backlog),
    )
    others = {(await start(db))[0] for _ in range(7)}
    seen: set[str] = set()
    for round_no in (1, 2):
        claimed = await claim(db, request(borrow=3, worker=f"w{round_no}"))
        seen |= {t.host_id for t, _ in claimed if t.execution_class == "interactive"}
    assert seen == others


async def test_seven_tenants_batch_tasks_are_claimed_within_two_rounds_despite_a_backlog(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    noisy, backlog = await start(db, execution_class="batch", timeout_ms=3_600_000)
    await admin.execute(
        "INSERT INTO workflow_task (host_id, process_id, step_no, kind, execution_class)"
        " SELECT %s, %s, n, 'echo', 'batch' FROM generate_series(1, 4999) AS n",
        (noisy, backlog),
    )
    others = {(await start(db, execution_class="batch"))[0] for _ in range(7)}
    seen: set[str] = set()
    for round_no in (1, 2):
        claimed = await claim(db, request(0, 0, 4, worker=f"w{round_no}"))
        seen |= {t.host_id for t, _ in claimed}
    assert others <= seen


async def test_batch_borrows_idle_interactive_slots_but_ready_interactive_work_comes_first(
    db: Database,
) -> None:
    for _ in range(6):
        await start(db, execution_class="batch")
    borrowed = await claim(db, request(interactive=3, standard=0, batch=1, borrow=2))
    assert [t.execution_class for t, _ in borrowed] == ["batch"] * 3

    interactive_host, _ = await start(db)
    claimed = await claim(db, request(interactive=1, standard=0, batch=0, borrow=1))
    assert [(t.execution_class, t.host_id) for t, _ in claimed] == [
        ("interactive", interactive_host)
    ]


async def test_an_effect_moves_from_possible_to_confirmed_under_the_lease(db: Database) -> None:
    host_id, process_id = await start(db, kind="write")
    [(task, lease)] = await claim(db, request())
    await service.mark_effect_possible(db, lease, task.step_no)
    assert (await service.get_process(db, host_id, process_id)).effect_state == "possible"  # type: ignore[union-attr]
    assert await service.confirm_effect(db, lease, task.step_no, {"id": 7})
    async with db.transaction() as conn:
        step = await ledgers.get_step(conn, host_id, process_id, task.step_no)
    assert step is not None and (step.effect_state, step.output) == ("confirmed", {"id": 7})
    run = await service.get_process(db, host_id, process_id)
    assert run is not None and run.effect_state == "confirmed"
    with pytest.raises(WorkflowError, match="may already have taken effect"):
        await service.mark_effect_possible(db, lease, task.step_no)


async def race(db_url: str, leases: list[LeaseState], amounts: BudgetAmounts) -> list[object]:
    """Reserve once per lease, each on its own connection, all released at one barrier."""
    database = Database(db_url, min_size=len(leases), max_size=len(leases))
    await database.open()
    barrier = asyncio.Barrier(len(leases))

    async def reserve(lease: LeaseState) -> object:
        async with database.transaction() as conn:
            await conn.execute("SELECT 1")
            await barrier.wait()
            try:
                return await ledgers.reserve_budget(conn, lease, amounts)
            except WorkflowError as error:
                return error

    try:
        return await asyncio.gather(*(reserve(lease) for lease in leases))
    finally:
        await database.close()


async def test_n_plus_one_racing_reservations_against_a_budget_of_n_commit_exactly_n(
    db: Database, database_url: str
) -> None:
    n = 6
    budget = BudgetAmounts(attempts=n, nested_calls=10, cost_units=10 * n)
    host_id, process_id = await start(db, budget=budget)
    async with db.transaction() as conn:
        for step_no in range(1, n + 1):
            task = NewTask("echo", step_no=step_no)
            await runs.insert_task(
                conn, host_id=host_id, process_id=process_id, task=task, step_no=step_no
            )
    leases = [lease for _, lease in await claim(db, request(interactive=n + 1))]
    assert len(leases) == n + 1

    results = await race(database_url, leases, BudgetAmounts(attempts=1, cost_units=10))

    refused = [r for r in results if isinstance(r, WorkflowError)]
    assert len(refused) == 1 and refused[0].code == "WORKFLOW_BUDGET_EXHAUSTED"
    run = await service.get_process(db, host_id, process_id)
    assert run is not None and (run.remaining_attempts, run.remaining_cost_units) == (0, 0)


async def test_reconciliation_credits_unused_budget_once_and_never_for_a_stale_lease(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id, process_id = await start(db, budget=BudgetAmounts(attempts=5, cost_units=100))
    [(_, lease)] = await claim(db, request())
    reservation = await service.reserve(db, lease, BudgetAmounts(cost_units=30))
    actual = BudgetAmounts(cost_units=12)

    first = await service.reconcile(db, lease, reservation, actual)
    duplicate = await service.reconcile(db, lease, reservation, actual)
    assert (first.settled, duplicate.settled) == (True, False)
    run = await service.get_process(db, host_id, process_id)
    assert run is not None and run.remaining_cost_units == 88

    second = await service.reserve(db, lease, BudgetAmounts(cost_units=20))
    await expire_lease(admin, lease.task_id)
    await maintenance.reap_expired_once(db, SETTINGS)
    with pytest.raises(LeaseLost):
        await service.reconcile(db, lease, second, BudgetAmounts())
    [(_, fresh)] = await claim(db, request())
    # Only the reserving lease may settle: the new owner cannot release the old reservation.
    assert not (await service.reconcile(db, fresh, second, BudgetAmounts())).settled
    run = await service.get_process(db, host_id, process_id)
    assert run is not None and run.remaining_cost_units == 68
