"""Background work of a service process: periodic jobs and the in-process workflow executor."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from runtime.admission import CapacitySampler
from runtime.cancellation import reraise_if_cancelled
from runtime.collaborators import Services
from runtime.execution import WorkflowRuntime, forget_expired_credentials
from runtime.human_tasks import sample_open_tasks
from runtime.invocation.retention import sweep_retention
from runtime.mcp.app import ServicesFactory
from runtime.publication import sample_binding_drift, sweep_operation_receipts
from runtime.receiver import reply_round
from runtime.scheduler import Executor, SchedulerSettings
from runtime.settings import Settings
from runtime.store import Database
from runtime.store.statistics import refresh_planner_statistics

log = logging.getLogger("workflow.jobs")

# The executor's own pool: a connection per slot up to EXECUTOR_POOL_SLOTS (a slot holds one
# only for its statements, so more slots share them), and spares for the claim loop, lease
# renewal and the reaper (its LISTEN connection is its own, outside the pool).
EXECUTOR_POOL_MIN = 2
EXECUTOR_POOL_SLOTS = 12
EXECUTOR_POOL_SPARE = 3
# The open-human-task gauge's sampling interval: tasks wait minutes to days, one count
# (an index-only scan of the open tasks) every 15 s is fresh enough.
HUMAN_TASK_SAMPLE_INTERVAL_S = 15.0
# Drift moves with publications, retirements and secret deletes: minutes are fresh enough.
BINDING_DRIFT_SAMPLE_INTERVAL_S = 300.0
# How often the run tables' planner statistics are looked at (runtime.store.statistics): a
# statement whose plan went stale costs more with every row the table gains, so the first
# refresh of a fresh install should come within seconds, not autovacuum's minute.
STATISTICS_REFRESH_INTERVAL_S = 5.0


class BackgroundJob(Protocol):
    """Something the app lifespan starts at start-up and stops at shutdown."""

    name: str

    def start(self) -> None:
        """Start in the background (returns at once)."""
        ...

    async def stop(self) -> None:
        """Stop and wait until stopped."""
        ...


@dataclass
class PeriodicJob:
    """Runs `work` every `interval_s` seconds until stopped; a failing run is logged, not fatal."""

    name: str
    interval_s: float
    work: Callable[[], Awaitable[object]]
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self) -> None:
        """Start the loop (first run at once)."""
        self._task = asyncio.create_task(self._loop(), name=f"job:{self.name}")

    async def stop(self) -> None:
        """Cancel the loop and wait for it."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.work()
            except Exception as exc:
                reraise_if_cancelled(exc)
                # Only the type: messages can carry SQL. The next interval retries.
                log.warning("job %s failed: %s", self.name, type(exc).__name__)
            await asyncio.sleep(self.interval_s)


@dataclass
class ExecutorJob:
    """The in-process workflow executor: claims and runs workflow tasks beside the API."""

    name: str
    executor: Executor
    runtime: WorkflowRuntime
    # The executor's own pool (opened with it, closed after it stopped), or None: it shares one.
    database: Database | None = None
    # A failed start (LISTEN refused, database down) is retried with doubling pauses.
    start_attempts: int = 8
    first_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    _starting: asyncio.Task[bool] | None = field(default=None, init=False)

    def start(self) -> None:
        """LISTEN and start claiming in the background, retrying a failed start."""
        self._starting = asyncio.create_task(self._start_with_retry(), name=f"job:{self.name}")

    def alive(self) -> bool:
        """Whether the executor runs (readiness reports it)."""
        return self.executor.alive

    async def _start_with_retry(self) -> bool:
        backoff = self.first_backoff_s
        for attempt in range(1, self.start_attempts + 1):
            try:
                if self.database is not None:
                    await self.database.open()
                await self.executor.start()
                return True
            except Exception as exc:
                # Only the type: messages can carry connection details.
                log.warning(
                    "job %s could not start (attempt %d of %d): %s",
                    self.name, attempt, self.start_attempts, type(exc).__name__,
                )  # fmt: skip
            if attempt < self.start_attempts:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
        log.error("job %s gave up starting; the service reports not ready", self.name)
        return False

    async def stop(self) -> None:
        """Stop claiming, let running tasks finish within the grace, release the rest."""
        if self._starting is None:
            return
        if not self._starting.done():
            self._starting.cancel()
        try:
            started = await self._starting
        except asyncio.CancelledError:
            started = False
        self._starting = None
        if started:
            await self.executor.stop()
        await self.runtime.aclose()
        if self.database is not None:
            await self.database.close()


def _conninfo(services: Services) -> str:
    conninfo = services.database.pool.conninfo
    if not isinstance(conninfo, str):
        raise ValueError("the pool's conninfo is computed: a job's own connections need a string")
    return conninfo


def scheduler_settings(settings: Settings) -> SchedulerSettings:
    """The executor's settings: the `execution` section's, with the completion batches'."""
    return dataclasses.replace(
        settings.execution.scheduler(),
        completion_statements=settings.capacity.completion_statements,
    )


def executor_job(services: Services) -> ExecutorJob:
    """The workflow executor of this process, configured by the `execution` settings."""
    section = services.settings.execution
    runtime = WorkflowRuntime.verifying(
        section.outbound,
        services.keyring,
        services.settings.security,
        destinations=services.settings.publication.destinations.address_policy(),
        resolver=services.resolver,
        maximum_parallelism=section.maximum_parallelism,
        database=services.database,
    )
    # The executor's own pool: under overload the request handlers hold every connection of the
    # shared pool, and an executor waiting behind them stops draining the very queue whose
    # length makes calls be shed (goodput fell with concurrency).
    slots = section.interactive_slots + section.standard_slots + section.batch_slots
    database = Database(
        _conninfo(services),
        runtime_role=services.database.runtime_role,
        min_size=EXECUTOR_POOL_MIN,
        max_size=min(slots, EXECUTOR_POOL_SLOTS) + EXECUTOR_POOL_SPARE,
        name="workflow-executor",
    )
    executor = Executor(
        database,
        runtime.handlers(),
        scheduler_settings(services.settings),
        # What it measures reaches this process's admission (runtime.scheduler.probe).
        probe=services.admission,
    )
    job = ExecutorJob("workflow-executor", executor, runtime, database=database)
    services.executor_alive = job.alive
    return job


def capacity_job(services: Services) -> CapacitySampler:
    """Samples the shared queue for deadline-aware admission; configures this process's slots."""
    settings = services.settings
    execution = settings.execution
    slots = {
        "interactive": execution.interactive_slots,
        "standard": execution.standard_slots,
        "batch": execution.batch_slots,
    }
    services.admission.configure(settings.capacity, slots if execution.workers_enabled else {})
    conninfo = _conninfo(services)
    return CapacitySampler(
        services.admission.estimator,
        conninfo,
        services.database.runtime_role,
        settings.capacity.sample_interval_ms / 1000,
        settings.capacity.idle_sample_interval_ms / 1000,
    )


def service_jobs(services: Services) -> list[BackgroundJob]:
    """The jobs every service process runs."""
    settings = services.settings
    db = services.database
    jobs: list[BackgroundJob] = [
        # Operation receipts are kept 30 days (seed 000 "Lost receipts"), then swept.
        PeriodicJob(
            "sweep-operation-receipts",
            settings.publication.receipt_sweep_interval_s,
            lambda: sweep_operation_receipts(db),
        ),
        # A sealed run credential is deleted when its run ends; this catches runs that ended
        # by deadline or crash (past their deadline a credential is never needed again).
        PeriodicJob(
            "sweep-run-credentials",
            settings.execution.credential_sweep_interval_s,
            lambda: forget_expired_credentials(db),
        ),
        # Reservations outlive their windows and finished runs pile up: both are swept once no
        # call can replay them any more (a live run and its reservation are never touched).
        PeriodicJob(
            "sweep-retention",
            settings.execution.retention_sweep_interval_s,
            lambda: sweep_retention(
                db,
                retention_s=settings.execution.run_retention_s,
                batch=settings.execution.retention_sweep_batch,
            ),
        ),
        # The open human tasks, for the workflow_human_tasks_open gauge.
        PeriodicJob(
            "sample-human-tasks", HUMAN_TASK_SAMPLE_INTERVAL_S, lambda: sample_open_tasks(db)
        ),
        # Active bindings whose dependencies drifted, for the workflow_bindings_drifted gauge.
        PeriodicJob(
            "sample-binding-drift",
            BINDING_DRIFT_SAMPLE_INTERVAL_S,
            lambda: sample_binding_drift(db),
        ),
        # Plans of the hot statements stay point lookups as the run tables grow.
        PeriodicJob(
            "refresh-planner-statistics",
            STATISTICS_REFRESH_INTERVAL_S,
            lambda: refresh_planner_statistics(db),
        ),
    ]
    if settings.lightspeed.holder_url is not None:
        # Replies to Lightspeed holders (issue 37): each ended run's source_resolution, sent
        # at least once with its one derived id, bounded retries.
        jobs.append(
            PeriodicJob(
                "lightspeed-replies",
                settings.lightspeed.reply_interval_s,
                lambda: reply_round(db, settings.lightspeed),
            )
        )
    if settings.execution.workers_enabled:
        jobs.append(executor_job(services))
    if settings.capacity.enabled:
        jobs.append(capacity_job(services))
    else:
        # Disabled must reach the process's admission too, or it keeps the defaults (enabled).
        services.admission.configure(settings.capacity)
    return jobs


def with_service_jobs(factory: ServicesFactory) -> ServicesFactory:
    """factory, with the service jobs started once services exist and stopped before close."""

    async def build() -> tuple[Services, Callable[[], Awaitable[None]]]:
        services, close = await factory()
        jobs = service_jobs(services)
        for job in jobs:
            job.start()

        async def stop_then_close() -> None:
            try:
                for job in jobs:
                    await job.stop()
            finally:
                await close()

        return services, stop_then_close

    return build
