"""The executor in-process: wake-up, LISTEN before catch-up, deadlines and effect safety."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from runtime.scheduler import faults, maintenance, service
from runtime.scheduler.lease import TaskLease
from runtime.scheduler.models import ClaimedTask, NewTask, SchedulerSettings, TaskOutcome
from runtime.scheduler.store import queue
from runtime.store import Database
from tests.support.demo import HANDLERS
from tests.support.scheduler import (
    enqueue,
    gated,
    running,
    start,
    wait_terminal,
)


async def test_an_idle_executor_is_woken_by_notify_without_the_fallback_poll(
    db: Database, database_url: str
) -> None:
    async with running(db, database_url) as executor:
        async with asyncio.timeout(5):
            while executor.claim_rounds < 1:
                await asyncio.sleep(0)
        host_id, process_id = await start(db)
        run = await wait_terminal(database_url, db, host_id, process_id)
    assert run.state == "COMPLETED" and run.result["echo"] == {}


async def test_an_idle_executor_claims_a_task_at_its_available_at_without_the_fallback_poll(
    db: Database, database_url: str
) -> None:
    async with running(db, database_url) as executor:
        async with asyncio.timeout(5):
            while executor.claim_rounds < 1:
                await asyncio.sleep(0)
        # A parked task (a durable timer's due time) inserted by someone else: its NOTIFY
        # wakes the executor before it is available; it must wake again at available_at.
        due = datetime.now(UTC) + timedelta(seconds=1)
        host_id, process_id = await start(db, first_task_available_at=due)
        run = await wait_terminal(database_url, db, host_id, process_id)
    assert run.state == "COMPLETED"


async def test_a_task_inserted_between_listen_and_the_first_claim_is_not_missed(
    db: Database, database_url: str
) -> None:
    inserted: list[tuple[str, str]] = []

    async def insert_now() -> None:
        inserted.append(await start(db))

    faults.set_hook("after_listen", insert_now)
    try:
        async with running(db, database_url):
            run = await wait_terminal(database_url, db, *inserted[0])
    finally:
        faults.set_hook("after_listen", None)
    assert run.state == "COMPLETED"


async def test_the_executor_reconnects_its_listener_and_catches_up(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    async with running(db, database_url) as executor:
        assert executor.listener is not None
        pid = executor.listener.backend_pid
        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        host_id, process_id = await start(db, "chain", payload={"remaining": 2})
        run = await wait_terminal(database_url, db, host_id, process_id)
        assert executor.listener.reconnects >= 1
    assert run.result == {"steps": 3}


async def test_an_eight_task_run_completes_step_by_step(db: Database, database_url: str) -> None:
    async with running(db, database_url):
        host_id, process_id = await start(db, "chain", payload={"remaining": 7})
        run = await wait_terminal(database_url, db, host_id, process_id)
    assert (run.state, run.result, run.remaining_attempts) == (
        "COMPLETED",
        {"steps": 8},
        32 - 8,
    )


async def test_a_run_past_its_deadline_without_effects_is_cancelled_with_a_stable_timeout(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    handlers = dict(HANDLERS, slow=gated(gate, started, write=False))
    async with running(db, database_url, handlers):
        host_id, process_id = await start(db, "slow")
        async with asyncio.timeout(5):
            await started.wait()
        await admin.execute(
            "UPDATE workflow_process SET deadline_ts = now() - interval '1 second'"
            " WHERE process_id = %s",
            (process_id,),
        )
        report = await maintenance.sweep_deadlines_once(db, SchedulerSettings())
        run = await wait_terminal(database_url, db, host_id, process_id)
        gate.set()
    assert report.timed_out == 1
    assert run.state == "CANCELLED"
    assert run.error == {
        "code": "WORKFLOW_TIMEOUT",
        "message": "the workflow deadline passed before the run finished",
        "retryable": False,
        "afterEffect": False,
    }


async def test_before_effects_only_lets_a_dispatched_write_finish_past_the_deadline(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    handlers = dict(HANDLERS, slow_write=gated(gate, started, write=True))
    async with running(db, database_url, handlers):
        host_id, process_id = await start(db, "slow_write")
        async with asyncio.timeout(5):
            await started.wait()
        await admin.execute(
            "UPDATE workflow_process SET deadline_ts = now() - interval '1 second'"
            " WHERE process_id = %s",
            (process_id,),
        )
        report = await maintenance.sweep_deadlines_once(db, SchedulerSettings())
        assert (report.timed_out, report.left_running) == (0, 1)
        assert (await service.get_process(db, host_id, process_id)).state == "RUNNING"  # type: ignore[union-attr]
        gate.set()
        run = await wait_terminal(database_url, db, host_id, process_id)
    step = await admin.execute(
        "SELECT effect_state FROM workflow_step WHERE process_id = %s", (process_id,)
    )
    assert (await step.fetchone() or {})["effect_state"] == "confirmed"
    assert run.state == "CANCELLED" and run.effect_state == "confirmed"
    assert (run.error["code"], run.error["afterEffect"]) == ("WORKFLOW_TIMEOUT", True)


async def reclaim_after_possible_effect(
    db: Database, admin: psycopg.AsyncConnection[Any], *, idempotent: bool
) -> tuple[str, str]:
    """A run whose first attempt marked its write possible and then lost its lease."""
    host_id = str(uuid.uuid4())
    process_id = await enqueue(
        db, host_id=host_id, first_task=NewTask("write", {}, idempotent=idempotent)
    )
    async with db.transaction() as conn:
        [(_, lease)] = await queue.claim_tasks(
            conn, queue.ClaimRequest("crashed", 1, 0, 0, 0), SchedulerSettings()
        )
    await service.mark_effect_possible(db, lease, 0)
    await admin.execute(
        "UPDATE workflow_task SET lease_expires_ts = now() - interval '1 second'"
        " WHERE task_id = %s",
        (lease.task_id,),
    )
    await maintenance.reap_expired_once(db, SchedulerSettings())
    return host_id, process_id


async def test_a_reclaimed_non_idempotent_step_with_a_possible_effect_is_not_redispatched(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id, process_id = await reclaim_after_possible_effect(db, admin, idempotent=False)
    async with running(db, database_url):
        run = await wait_terminal(database_url, db, host_id, process_id)
    assert run.state == "FAILED"
    assert (run.error["code"], run.error["afterEffect"]) == ("WORKFLOW_TASK_FAILED", True)


async def test_a_reclaimed_idempotent_step_with_a_possible_effect_is_redispatched(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id, process_id = await reclaim_after_possible_effect(db, admin, idempotent=True)
    async with running(db, database_url):
        run = await wait_terminal(database_url, db, host_id, process_id)
    assert (run.state, run.result, run.effect_state) == (
        "COMPLETED",
        {"written": True},
        "confirmed",
    )


async def test_a_handler_error_fails_the_run_with_a_sanitized_task_failure(
    db: Database, database_url: str
) -> None:
    async def broken(task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
        raise KeyError("secret internal detail")

    async with running(db, database_url, dict(HANDLERS, broken=broken)):
        host_id, process_id = await start(db, "broken")
        run = await wait_terminal(database_url, db, host_id, process_id)
    assert run.error["code"] == "WORKFLOW_TASK_FAILED"
    assert "secret" not in json.dumps(run.error)


async def test_a_renewal_that_misses_a_task_it_just_completed_does_not_lose_its_successor(
    db: Database, database_url: str, monkeypatch: Any
) -> None:
    # The race CI met: a renewal blocked behind the completing transaction answers "not
    # renewed" for the finished step, and its answer is handled before the job resumes. Read
    # as a lost lease it cancelled the job that was about to run the successor the completion
    # had just claimed, which then sat unrenewed until its lease expired and ran twice.
    real_complete = service.complete
    executor_of: list[Any] = []

    async def complete_then_renew(*args: Any, **kwargs: Any) -> Any:
        completion = await real_complete(*args, **kwargs)
        await executor_of[0]._renew_once()
        return completion

    monkeypatch.setattr(service, "complete", complete_then_renew)
    settings = SchedulerSettings(poll_interval_ms=60_000, lease_ms=30_000)
    async with running(db, database_url, settings=settings) as executor:
        executor_of.append(executor)
        host_id, process_id = await start(db, "chain", payload={"remaining": 3})
        run = await wait_terminal(database_url, db, host_id, process_id)
    assert (run.state, run.result) == ("COMPLETED", {"steps": 4})
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT attempts FROM workflow_task WHERE process_id = %s ORDER BY step_no",
            (process_id,),
        )
        assert [row[0] for row in await cursor.fetchall()] == [1, 1, 1, 1]
