"""Deadline-aware admission through POST /mcp (seed 001 "Capacity And Availability").

A saturated class refuses a call that cannot finish within its deadline with
WORKFLOW_CAPACITY_EXHAUSTED and retryAfterMs, and writes nothing (for a Tool this process has
admitted before, without reading anything); a call whose queue wait exceeds a second but fits
its deadline is admitted; a batch backlog never makes interactive calls be refused. The queue
is really saturated (runs enqueued with no executor taking them) and really sampled; the
service time is recorded as the executor records it.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

import runtime.admission.invoke as invoke_module
from runtime.admission import CapacitySettings
from runtime.admission.controller import CapacityEstimator
from runtime.admission.sampler import sample_once
from runtime.canonical import load_definition_yaml
from runtime.collaborators import Services
from runtime.composition.jobs import capacity_job
from runtime.store import Database
from runtime.telemetry import metrics
from tests.support.binding_builders import HOST, definition_yaml
from tests.support.execution_runs import start_workflow_run
from tests.support.invocation import invoke_args, ok, publish_tool, refused, running_executor
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Capacity And Availability")

WRITTEN_BY_ADMISSION = (
    "workflow_process",
    "workflow_task",
    "workflow_idempotency_t",
    "workflow_invocation_t",
    "workflow_run_spec",
    "workflow_run_credential",
    "workflow_budget",
)
BACKLOG = 40
SERVICE_S = 0.2  # per task: 40 queued over 4 slots is 2 s of queue


@pytest.fixture(autouse=True)
def estimator(services: Services) -> CapacityEstimator:
    """The app's estimator, configured so samples stay fresh for the whole test."""
    settings = CapacitySettings(
        safety_factor=1.0, interactive_queue_wait_ms=None, stale_after_ms=600_000
    )
    services.admission.configure(settings, {"interactive": 4, "standard": 2, "batch": 2})
    return services.admission.estimator


async def _enqueue(services: Services, execution_class: Any, count: int) -> None:
    document = load_definition_yaml(definition_yaml())
    for n in range(count):
        await start_workflow_run(
            services.database,
            host_id=HOST,
            user_id="backlog",
            input={"n": n},
            keyring=services.keyring,
            credential=None,
            definition=document,
            execution_class=execution_class,
            timeout_ms=600_000,
        )


async def _row_counts(db: Database) -> dict[str, int]:
    counts = {}
    async with db.connection() as conn:
        for table in WRITTEN_BY_ADMISSION:
            cursor = await conn.execute(f"SELECT count(*) AS n FROM {table}")
            row = await cursor.fetchone()
            assert row is not None
            counts[table] = int(row["n"])
    return counts


async def test_a_call_that_cannot_meet_its_deadline_is_refused_and_nothing_is_written(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    estimator: CapacityEstimator,
) -> None:
    tool = await publish_tool(owner, syncWaitMs=1000)
    await _enqueue(services, "interactive", BACKLOG)
    estimator.record_service("interactive", SERVICE_S)
    await sample_once(services.database, estimator)
    before = await _row_counts(services.database)

    body = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool)),
        "WORKFLOW_CAPACITY_EXHAUSTED",
    )

    assert body["error"]["retryable"] is True
    # 2 s of queue (or what the oldest task has waited, if longer on a slow machine) + 0.2 s
    # of service against a 1 s syncWaitMs: back when the excess has drained.
    queue_ms = max(2000, estimator.load["interactive"].oldest_ready_ms)
    assert body["error"]["retryAfterMs"] == min(5000, math.ceil(queue_ms + 200 - 1000))
    assert "workflowInstanceId" not in body
    assert await _row_counts(services.database) == before


async def test_a_known_tool_that_cannot_meet_its_deadline_is_refused_with_one_lock_free_read(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    estimator: CapacityEstimator,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tool = await publish_tool(owner, syncWaitMs=1000)
    # One admission teaches this process the Tool's budget (no worker: it times out).
    first = await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-0"}))
    first = refused(first, "WORKFLOW_TIMEOUT")
    assert first["workflowInstanceId"]
    await _enqueue(services, "interactive", BACKLOG)
    estimator.record_service("interactive", SERVICE_S)
    await sample_once(services.database, estimator)
    before = await _row_counts(services.database)

    async def no_reads(*_: Any) -> None:
        raise AssertionError("admission read the Tool again for a call it had to refuse")

    # The revision comes from this process's cache; the one round trip is the statement, which
    # looks only for this call's own reservation (no lock, no write) before refusing it.
    monkeypatch.setattr(invoke_module.store, "select_active_revision", no_reads)
    body = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-1"})),
        "WORKFLOW_CAPACITY_EXHAUSTED",
    )

    assert body["error"]["retryable"] is True and "workflowInstanceId" not in body
    # The first call's run is queued too: 41 runs over 4 slots of 200 ms.
    load = estimator.load["interactive"]
    queue_ms = max(load.ready * SERVICE_S * 1000 / 4, load.oldest_ready_ms)
    expected = min(5000, math.ceil(queue_ms + 200 - 1000))
    assert body["error"]["retryAfterMs"] == pytest.approx(expected, abs=1)
    # No run, task, reservation or credential for the refused call.
    assert await _row_counts(services.database) == before

    # Seed 000: an active key attaches before any capacity check, so the first call's retry
    # re-attaches to its run although the class is shedding new runs.
    again = await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-0"}))
    assert refused(again, "WORKFLOW_TIMEOUT")["workflowInstanceId"] == first["workflowInstanceId"]
    assert await _row_counts(services.database) == before


async def test_a_queue_wait_over_a_second_is_admitted_when_the_deadline_fits(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    estimator: CapacityEstimator,
) -> None:
    # The default settings: no fixed interactive queue-wait objective, only the deadline.
    estimator.settings = CapacitySettings(safety_factor=1.0, stale_after_ms=600_000)
    tool = await publish_tool(owner, syncWaitMs=20000)
    await _enqueue(services, "interactive", BACKLOG)
    estimator.record_service("interactive", SERVICE_S)
    await sample_once(services.database, estimator)
    predicted = estimator.predict("interactive")
    assert predicted is not None and predicted.queue_wait_ms >= 2000

    call = asyncio.create_task(caller.call_tool("workflow_invoke", invoke_args(tool)))

    # Admitted behind 2 s of queue; then executors come and drain it, the call's run too.
    async def admitted() -> bool:
        return (await _row_counts(services.database))["workflow_process"] == BACKLOG + 1

    await wait_until(admitted, what="the call's run admitted behind the queue")
    async with running_executor(services):
        result = ok(await asyncio.wait_for(call, 60))

    assert result is not None


async def test_the_queue_wait_objective_sheds_before_admission_writes_anything(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    estimator: CapacityEstimator,
) -> None:
    tool = await publish_tool(owner, syncWaitMs=20000)
    await _enqueue(services, "interactive", BACKLOG)
    estimator.record_service("interactive", SERVICE_S)
    await sample_once(services.database, estimator)
    estimator.settings = CapacitySettings(
        safety_factor=1.0, interactive_queue_wait_ms=500, stale_after_ms=600_000
    )
    before = await _row_counts(services.database)
    body = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_CAPACITY_EXHAUSTED"
    )
    queue_ms = max(2000, estimator.load["interactive"].oldest_ready_ms)
    assert body["error"]["retryAfterMs"] == min(5000, math.ceil(queue_ms - 500))
    # Seed 000 admission order: the Tool is looked up (host-scoped) before any capacity
    # check, so an unknown stableToolRef reads as unknown, whatever the load.
    unknown = invoke_args(tool) | {"stableToolRef": "00000000-0000-4000-8000-000000000000"}
    refused(await caller.call_tool("workflow_invoke", unknown), "WORKFLOW_NOT_FOUND")
    assert await _row_counts(services.database) == before


async def test_a_batch_backlog_does_not_make_interactive_calls_be_refused(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    estimator: CapacityEstimator,
) -> None:
    tool = await publish_tool(owner, syncWaitMs=20000)
    # The backlog is enqueued and sampled before any executor runs: one running meanwhile
    # could drain it before the sample, and the test would prove nothing.
    await _enqueue(services, "batch", BACKLOG * 10)
    estimator.record_service("batch", SERVICE_S)
    await sample_once(services.database, estimator)
    assert estimator.load["batch"].ready == BACKLOG * 10
    estimator.settings = CapacitySettings(
        safety_factor=1.0, interactive_queue_wait_ms=500, stale_after_ms=600_000
    )

    async with running_executor(services):
        result = ok(await caller.call_tool("workflow_invoke", invoke_args(tool)))

    assert result is not None


async def test_the_sampler_job_reads_the_queue_on_its_own_connection(
    services: Services, estimator: CapacityEstimator
) -> None:
    await _enqueue(services, "interactive", 3)
    job = capacity_job(services)
    fresh = services.admission.estimator
    assert fresh.slots["interactive"] == services.settings.execution.interactive_slots
    job.start()
    try:
        async with asyncio.timeout(30):
            while "interactive" not in fresh.load:
                await asyncio.sleep(0.02)
    finally:
        await job.stop()
    assert fresh.load["interactive"].ready == 3
    assert fresh.load["interactive"].oldest_ready_ms >= 0


def _loop_lag_samples(at_least_s: float) -> float:
    """Samples of workflow_event_loop_lag_seconds at or above a bucket bound."""
    total = metrics.REGISTRY.get_sample_value("workflow_event_loop_lag_seconds_count") or 0.0
    below = metrics.REGISTRY.get_sample_value(
        "workflow_event_loop_lag_seconds_bucket", {"le": str(at_least_s)}
    )
    return total - (below or 0.0)


async def test_the_sampler_job_exports_how_late_the_event_loop_runs(services: Services) -> None:
    job = capacity_job(services)
    late_before = _loop_lag_samples(0.05)
    count_before = metrics.REGISTRY.get_sample_value("workflow_event_loop_lag_seconds_count")
    job.start()
    try:
        await asyncio.sleep(0.3)
        # A callback that holds the loop: the sampler's next timer fires that much late.
        time.sleep(0.12)
        async with asyncio.timeout(30):
            while _loop_lag_samples(0.05) == late_before:
                await asyncio.sleep(0.02)
    finally:
        await job.stop()
    count = metrics.REGISTRY.get_sample_value("workflow_event_loop_lag_seconds_count")
    assert count is not None and count > (count_before or 0.0) + 1
