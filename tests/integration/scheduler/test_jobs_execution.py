"""Background work of the service process: the run-credential sweep and the in-process executor."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar import Litestar

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.composition.jobs import ExecutorJob, service_jobs, with_service_jobs
from runtime.execution import close_waiter, wait_for_result
from runtime.execution.settings import ServiceExecutionSettings
from runtime.mcp.app import create_app
from runtime.security import SecretToken
from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.execution import document, set_tasks
from tests.support.execution_runs import start_workflow_run
from tests.support.waiting import wait_until

FAST = {"lease_ms": 600, "renew_interval_ms": 150, "reap_interval_ms": 150}


@pytest.fixture(autouse=True)
async def _close_waiter(db: Database) -> AsyncIterator[None]:
    yield
    await close_waiter(db)


async def _credential_ids(db: Database) -> set[str]:
    async with db.connection() as conn:
        cursor = await conn.execute("SELECT process_id::text AS id FROM workflow_run_credential")
        return {row["id"] for row in await cursor.fetchall()}


async def _swept(db: Database, process_id: str) -> bool:
    return process_id not in await _credential_ids(db)


async def _admit(services: Services, token: str, deadline: datetime) -> str:
    return await start_workflow_run(
        services.database,
        host_id=str(uuid.uuid4()),
        user_id="u-1",
        input={"seen": 0},
        keyring=services.keyring,
        credential=SecretToken(token),
        definition=document(set_tasks(2)),
        deadline=deadline,
    )


async def test_the_credential_sweep_job_forgets_only_credentials_past_their_run_deadline(
    services: Services, db: Database, dev_identity: DevIdentity
) -> None:
    services.settings.execution = ServiceExecutionSettings(
        workers_enabled=False, credential_sweep_interval_s=0.05
    )
    token = dev_identity.user_token()
    now = datetime.now(UTC)
    late = await _admit(services, token, now - timedelta(seconds=1))
    live = await _admit(services, token, now + timedelta(minutes=5))
    assert await _credential_ids(db) == {late, live}
    jobs = service_jobs(services)
    assert "sweep-run-credentials" in {job.name for job in jobs}
    for job in jobs:
        job.start()
    try:
        await wait_until(
            lambda: _swept(db, late), what="the sweep removing the late credential", within_s=5
        )
    finally:
        for job in jobs:
            await job.stop()
    assert await _credential_ids(db) == {live}


def test_the_executor_job_runs_only_when_workers_are_enabled(services: Services) -> None:
    services.settings.execution = ServiceExecutionSettings(workers_enabled=False)
    assert not any(isinstance(job, ExecutorJob) for job in service_jobs(services))
    services.settings.execution = ServiceExecutionSettings(workers_enabled=True)
    assert any(isinstance(job, ExecutorJob) for job in service_jobs(services))


def _factory(
    services: Services,
) -> Callable[[], Awaitable[tuple[Services, Callable[[], Awaitable[None]]]]]:
    async def close() -> None:
        return None  # the test owns the database

    async def factory() -> tuple[Services, Callable[[], Awaitable[None]]]:
        return services, close

    return factory


async def test_an_app_started_with_a_services_factory_runs_a_workflow_it_admits(
    services: Services, db: Database, dev_identity: DevIdentity
) -> None:
    services.settings.execution = ServiceExecutionSettings(**FAST)
    app = create_app(with_service_jobs(_factory(services)), HANDLERS)
    deadline = datetime.now(UTC) + timedelta(seconds=30)
    async with lifespan(app):
        process_id = await _admit(services, dev_identity.user_token(), deadline)
        host = await _host_of(db, process_id)
        run = await wait_for_result(db, host, process_id, timeout=20)
    assert run is not None and run.state == "COMPLETED", run
    assert run.result == {"step": 1, "seen": 1}


@asynccontextmanager
async def lifespan(app: Litestar) -> AsyncIterator[None]:
    """Run the app's ASGI lifespan on this event loop (the test's database pool lives here)."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    running = asyncio.create_task(app(scope, inbox.get, outbox.put))  # type: ignore[arg-type]
    await inbox.put({"type": "lifespan.startup"})
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        assert (await outbox.get())["type"] == "lifespan.shutdown.complete"
        await running


async def _host_of(db: Database, process_id: str) -> str:
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT host_id::text AS host FROM workflow_process WHERE process_id = %s",
            (process_id,),
        )
        row = await cursor.fetchone()
    assert row is not None
    return str(row["host"])
