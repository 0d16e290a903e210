"""The database dropped in the middle of a run's write: the run's answer agrees with its
effect state (issue 42 item 7 (a)).

The fault is real: once the write is confirmed, a superuser holds the run's budget
reservation, so the worker's settlement of it waits on that lock, and then terminates the
backend that waits. The worker sees the server's own dropped connection, as in a restart.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import psycopg
import pytest

from runtime.execution import WorkflowRuntime
from runtime.execution.effects import AFTER_CONFIRM_POINT
from runtime.execution.settings import ExecutionSettings
from runtime.scheduler import faults, service
from runtime.scheduler.lease import LEDGER_WRITE_TRIES
from runtime.scheduler.models import NewTask, SchedulerSettings
from runtime.scheduler.store import queue
from runtime.security import Keyring
from runtime.store import Database, StoreUnavailable
from tests.support.execution import LOCAL_BACKENDS, LocalServer, document, executor, serving
from tests.support.execution_runs import finished, start
from tests.support.scheduler import enqueue
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Idempotency And Side Effects")

WAITING_ON = (
    "SELECT pid FROM pg_stat_activity"
    " WHERE wait_event_type = 'Lock' AND %s = ANY(pg_blocking_pids(pid))"
)


@pytest.fixture
def hooks() -> AsyncIterator[None]:
    yield
    faults.set_hook(AFTER_CONFIRM_POINT, None)


def drop_the_settlement(
    database_url: str, done: list[asyncio.Task[None]], times: int
) -> Callable[[], Awaitable[None]]:
    """A hook that, the first time, kills the connection the run's budget settlement runs on,
    and the next times-1 ones its tries run on."""

    async def hook() -> None:
        if done:
            return
        holder = await psycopg.AsyncConnection.connect(database_url)
        await holder.execute(
            "SELECT 1 FROM workflow_budget_reservation WHERE state = 'reserved' FOR UPDATE"
        )

        async def terminate_the_waiter() -> None:
            async with await psycopg.AsyncConnection.connect(
                database_url, autocommit=True
            ) as admin:
                killed: set[int] = set()
                while len(killed) < times:
                    cursor = await admin.execute(WAITING_ON, (holder.info.backend_pid,))
                    # A terminated backend may still be listed for a moment: only new ones.
                    waiting = {pid for (pid,) in await cursor.fetchall()} - killed
                    for pid in waiting:
                        await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                    killed |= waiting
                    await asyncio.sleep(0.01)
            await holder.rollback()
            await holder.close()

        done.append(asyncio.create_task(terminate_the_waiter()))

    return hook


@pytest.mark.parametrize(
    ("drops", "claims"),
    [
        # One drop: the settlement is tried again on a fresh connection, in place.
        (1, 1),
        # Every try dropped: the task is given back and runs again from the step ledger.
        (LEDGER_WRITE_TRIES, 2),
    ],
    ids=["tried-again", "task-runs-again"],
)
async def test_a_database_dropped_after_a_confirmed_write_never_ends_the_run_retryable(
    db: Database, database_url: str, keyring: Keyring, hooks: None, drops: int, claims: int
) -> None:
    host = str(uuid.uuid4())
    dropped: list[asyncio.Task[None]] = []
    faults.set_hook(AFTER_CONFIRM_POINT, drop_the_settlement(database_url, dropped, drops))
    async with serving(LocalServer()) as server:
        settings = ExecutionSettings(http_allowlist=[server.base])
        post = {"call": "http", "with": {"method": "post", "endpoint": f"{server.base}/orders"}}
        doc = document([{"save": post}, {"after": {"set": {"done": True}}}])
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(db, keyring, doc, {}, host_id=host)
            run = await finished(db, host, pid)
    assert dropped, "the fault point was never reached"
    await dropped[0]
    # The write went out once and was confirmed: the run resumes from its recorded output.
    assert len(server.requests) == 1
    assert run.effect_state == "confirmed"
    assert run.state == "COMPLETED", run.error
    assert run.result == {"done": True}
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT attempts FROM workflow_task WHERE process_id = %s ORDER BY step_no LIMIT 1",
            (pid,),
        )
        row = await cursor.fetchone()
    assert row is not None and row["attempts"] == claims


async def test_a_run_failed_after_an_effect_is_stored_after_effect_and_not_retryable(
    db: Database,
) -> None:
    """Whatever raised it, the stored error of a run with an effect says so (the backstop)."""
    host = str(uuid.uuid4())
    pid = await enqueue(db, host_id=host, first_task=NewTask("run", {}))
    async with db.transaction() as conn:
        [(task, lease)] = await queue.claim_tasks(
            conn, queue.ClaimRequest("worker", 1, 0, 0, 0), SchedulerSettings()
        )
    await service.mark_effect_possible(db, lease, task.step_no)
    await service.confirm_effect(db, lease, task.step_no, {"ok": True})
    await service.fail(db, lease, StoreUnavailable())
    row = await service.get_process(db, host, pid)
    assert row is not None and row.state == "FAILED"
    assert row.error is not None
    assert row.error["afterEffect"] is True and row.error["retryable"] is False


async def test_a_lease_lost_under_a_call_in_flight_leaves_no_unretrieved_task_exception(
    db: Database, keyring: Keyring, caplog: pytest.LogCaptureFixture
) -> None:
    """A call cancelled with its lost lease settles its budget under that lease, which raises
    LeaseLost on the serving loop after its caller stopped waiting: handled, not left for
    asyncio to report as "Task exception was never retrieved" (issue 42 item 7 (c))."""
    host = str(uuid.uuid4())
    async with serving(LocalServer(delay_s=1.0)) as server:
        settings = ExecutionSettings(http_allowlist=[server.base])
        get = {"call": "http", "with": {"method": "get", "endpoint": f"{server.base}/slow"}}
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(db, keyring, document([{"read": get}]), {}, host_id=host)
            await wait_until(lambda: _sent(server), what="the call in flight")
            # Another claim took the task over (what a reaper does after a stall).
            async with db.transaction() as conn:
                await conn.execute(
                    "UPDATE workflow_task SET lease_id = gen_random_uuid()"
                    " WHERE process_id = %s AND state = 'running'",
                    (pid,),
                )
            await wait_until(lambda: _completed(server), what="the call answered", within_s=10)
            await asyncio.sleep(0.3)
    gc.collect()
    await asyncio.sleep(0)
    unretrieved = [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert unretrieved == []


async def _sent(server: LocalServer) -> bool:
    return len(server.requests) >= 1


async def _completed(server: LocalServer) -> bool:
    return server.completed >= 1
