"""Real worker processes: a killed worker's run resumes from its checkpoint elsewhere, and a
write that may already have happened is never sent twice."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from runtime.execution import close_waiter, wait_for_result
from runtime.scheduler import service
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.models import LeaseState, TaskOutcome
from runtime.security import Keyring
from runtime.store import Database
from tests.support.execution import (
    LocalServer,
    document,
    serving,
    set_tasks,
    worker_process,
)
from tests.support.execution_runs import start_workflow_run

pytestmark = pytest.mark.requirement("001:Idempotency And Side Effects")


@pytest.fixture
async def waiter_closed(db: Database) -> AsyncIterator[None]:
    """Close the test database's result waiter afterwards."""
    yield
    await close_waiter(db)


async def start(db: Database, host: str, doc: dict[str, Any], data: Any) -> str:
    return await start_workflow_run(
        db, host_id=host, user_id="u-1", input=data, keyring=Keyring.empty(), credential=None,
        definition=doc, timeout_ms=25_000,
    )  # fmt: skip


async def tasks_of(database_url: str, pid: str) -> list[dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cursor = await conn.execute(
            "SELECT * FROM workflow_task WHERE process_id = %s ORDER BY step_no", (pid,)
        )
        return list(await cursor.fetchall())


def lease_of(row: dict[str, Any]) -> LeaseState:
    return LeaseState(
        host_id=str(row["host_id"]), task_id=str(row["task_id"]),
        process_id=str(row["process_id"]), step_no=row["step_no"], lease_id=str(row["lease_id"]),
        fencing_token=row["fencing_token"], expires_ts=row["lease_expires_ts"],
    )  # fmt: skip


async def test_a_killed_worker_is_recovered_from_the_checkpoint_and_its_late_write_is_fenced(
    db: Database, database_url: str, waiter_closed: None
) -> None:
    host = str(uuid.uuid4())
    async with worker_process(database_url, "doomed", faults="before_workflow_task_3=kill") as w:
        pid = await start(db, host, document(set_tasks(8)), {"seen": 0})
        async with asyncio.timeout(20):
            assert await w.wait() == -signal.SIGKILL
    rows = await tasks_of(database_url, pid)
    assert [row["state"] for row in rows] == ["done", "done", "done", "running"]
    stale = lease_of(rows[-1])

    # The rescuer's own leases are long: a stall of the loaded machine must not make it lose
    # one and run a later step twice (a reclaim this test does not count on).
    async with worker_process(database_url, "rescuer", lease_ms=10_000):
        run = await wait_for_result(db, host, pid, timeout=20)
    assert run is not None and run.state == "COMPLETED"
    assert run.result == {"step": 7, "seen": 28}
    rows = await tasks_of(database_url, pid)
    # Only the interrupted step ran twice; the checkpointed ones were not repeated.
    assert [row["attempts"] for row in rows] == [1, 1, 1, 2, 1, 1, 1, 1]
    with pytest.raises(LeaseLost):
        await service.complete(db, stale, TaskOutcome.finish_run({"by": "stale"}))
    after = await wait_for_result(db, host, pid, timeout=1)
    assert after is not None and after.result == run.result


async def test_a_reclaimed_write_that_may_have_happened_is_not_sent_again(
    db: Database, database_url: str, waiter_closed: None
) -> None:
    host = str(uuid.uuid4())
    async with serving(LocalServer()) as server:
        settings = {"http_allowlist": [server.base]}
        post = {"call": "http", "with": {"method": "post", "endpoint": f"{server.base}/pay"}}
        doc = document([{"pay": post}, {"after": {"set": {"paid": True}}}])
        async with worker_process(
            database_url, "doomed", faults="after_effect_dispatch=kill", settings=settings
        ) as doomed:
            pid = await start(db, host, doc, {})
            async with asyncio.timeout(20):
                assert await doomed.wait() == -signal.SIGKILL
        async with worker_process(database_url, "rescuer", settings=settings):
            run = await wait_for_result(db, host, pid, timeout=20)
    assert run is not None and run.state == "FAILED"
    assert run.error["code"] == "WORKFLOW_TASK_FAILED" and run.error["afterEffect"] is True
    assert "not re-dispatched" in run.error["message"]
    assert len(server.requests) == 1
