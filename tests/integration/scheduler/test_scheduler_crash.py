"""Real worker processes: one SIGKILLed right after claiming is recovered by another."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from runtime.scheduler import service
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.models import LeaseState, NewTask, TaskOutcome
from runtime.store import Database
from tests.support.processes import worker_command
from tests.support.scheduler import enqueue, process_state_channel


@asynccontextmanager
async def worker(
    database_url: str, name: str, faults: str = ""
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A worker process, yielded once it has printed ready; terminated on exit."""
    env = dict(os.environ, WORKFLOW_FAULTS=faults)
    args = [
        "--handlers", "tests.support.demo:HANDLERS", "--database-url", database_url,
        "--worker-id", name, "--poll-interval-ms", "60000",
    ]  # fmt: skip
    async with worker_command(args, env) as proc:
        yield proc


async def stale_lease(database_url: str, task_id: str) -> LeaseState:
    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cursor = await conn.execute("SELECT * FROM workflow_task WHERE task_id = %s", (task_id,))
        row = await cursor.fetchone()
    assert row is not None and row["state"] == "running"
    return LeaseState(
        host_id=str(row["host_id"]),
        task_id=task_id,
        process_id=str(row["process_id"]),
        step_no=row["step_no"],
        lease_id=str(row["lease_id"]),
        fencing_token=row["fencing_token"],
        expires_ts=row["lease_expires_ts"],
    )


async def wait_completed(database_url: str, db: Database, host_id: str, pid: str) -> Any:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"LISTEN {process_state_channel(pid)}")
        async with asyncio.timeout(20):
            run = await service.get_process(db, host_id, pid)
            while run is None or run.state not in ("COMPLETED", "FAILED", "CANCELLED"):
                async for notify in conn.notifies():
                    if json.loads(notify.payload)["id"] == pid:
                        break
                run = await service.get_process(db, host_id, pid)
    return run


async def test_a_worker_killed_after_claim_is_recovered_and_its_late_completion_is_rejected(
    db: Database, database_url: str
) -> None:
    host_id = str(uuid.uuid4())
    async with worker(database_url, "doomed", faults="after_claim=kill") as doomed:
        process_id = await enqueue(
            db, host_id=host_id, first_task=NewTask("echo", {"v": 1}), timeout_ms=20_000
        )
        async with asyncio.timeout(20):
            assert await doomed.wait() == -signal.SIGKILL

    async with await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) as conn:
        cursor = await conn.execute(
            "SELECT task_id FROM workflow_task WHERE process_id = %s", (process_id,)
        )
        task_id = str((await cursor.fetchone() or {})["task_id"])
    stale = await stale_lease(database_url, task_id)

    async with worker(database_url, "rescuer"):
        run = await wait_completed(database_url, db, host_id, process_id)

    assert run.state == "COMPLETED" and run.result["echo"] == {"v": 1}
    with pytest.raises(LeaseLost):
        await service.complete(db, stale, TaskOutcome.finish_run({"by": "stale"}))
    after = await service.get_process(db, host_id, process_id)
    assert after is not None and after.result == run.result
