"""The executor job retries a failed start and readiness reports an executor that is not running."""

from __future__ import annotations

import logging

import pytest

from runtime.collaborators import Services
from runtime.composition.jobs import ExecutorJob
from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.scheduler import Executor, faults
from runtime.store import Database
from tests.support.waiting import wait_until


def _job(services: Services, executor: Executor, attempts: int) -> ExecutorJob:
    runtime = WorkflowRuntime(ExecutionSettings(), services.keyring)
    job = ExecutorJob(
        "workflow-executor", executor, runtime, start_attempts=attempts, first_backoff_s=0.01
    )
    services.executor_alive = job.alive
    return job


async def _wait_started(job: ExecutorJob) -> None:
    await wait_until(
        lambda: job._starting is None or job._starting.done(),
        what="the executor start attempts ending",
        within_s=20,
    )


async def test_a_failed_executor_start_is_retried_until_it_runs(
    services: Services, db: Database, database_url: str
) -> None:
    failures = [RuntimeError("listen refused"), RuntimeError("listen refused")]

    async def flaky_listen() -> None:
        if failures:
            raise failures.pop()

    job = _job(services, Executor(db, {}, conninfo=database_url), attempts=5)
    faults.set_hook("after_listen", flaky_listen)
    try:
        job.start()
        await _wait_started(job)
        assert failures == []
        assert (await services.readiness())["executor"] is True
    finally:
        faults.set_hook("after_listen", None)
        await job.stop()


async def test_an_executor_that_never_starts_makes_the_service_not_ready(
    services: Services, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workflow.jobs")
    unreachable = "postgresql://nobody:secret-password@127.0.0.1:1/none?connect_timeout=1"
    job = _job(services, Executor(db, {}, conninfo=unreachable), attempts=3)
    try:
        job.start()
        await _wait_started(job)
        assert (await services.readiness())["executor"] is False
    finally:
        await job.stop()
    messages = [r.getMessage() for r in caplog.records if r.name == "workflow.jobs"]
    assert sum("could not start" in m for m in messages) == 3
    assert not any("secret-password" in m or "127.0.0.1" in m for m in messages)
