"""A run past its deadline ends one way, whether the deadline sweep or a re-attaching caller
notices first: CANCELLED with WORKFLOW_TIMEOUT (retryable false), and every caller reads it."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from runtime.collaborators import Services
from runtime.scheduler import faults, maintenance, service
from runtime.scheduler.maintenance import SWEEP_LOCKED_POINT, SweepReport
from runtime.scheduler.models import SchedulerSettings
from runtime.scheduler.service import CANCEL_LOCKED_POINT
from runtime.scheduler.store import queue
from tests.support.deadline_end import (
    assert_one_end,
    blocked_on_the_run_row,
    deadline_end,
    late_run,
    wait_past_deadline,
)
from tests.support.invocation import invoke_args, ok, refused
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.requirement("000:Waiting, timeout and re-attach"),
    pytest.mark.requirement("000:QC-04"),
]

# Leases outlast the test: the claimed task below is never claimed again.
HOLD = SchedulerSettings(lease_ms=600_000)
# Every heartbeat is stale: the worker that dispatched the write is gone.
WORKER_GONE = SchedulerSettings(lease_ms=1)


async def test_a_caller_re_attaching_while_the_sweep_holds_the_run_ends_it_and_both_read_one_end(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    admin: psycopg.AsyncConnection[Any],
) -> None:
    tool, instance = await late_run(owner, caller)
    await wait_past_deadline(caller, instance)
    reattached: list[asyncio.Task[dict[str, Any]]] = []

    async def re_attach_while_the_sweep_holds_the_run() -> None:
        # The caller finds the run live past its deadline, takes its task row and waits for
        # the run row the sweep holds (task rows first: runtime.scheduler.store.runs).
        call = caller.call_tool("workflow_invoke", invoke_args(tool))
        reattached.append(asyncio.create_task(call))
        await wait_until(
            lambda: blocked_on_the_run_row(admin), what="the re-attach waiting on the swept run"
        )

    faults.set_hook(SWEEP_LOCKED_POINT, re_attach_while_the_sweep_holds_the_run)
    try:
        report = await maintenance.sweep_deadlines_once(services.database, SchedulerSettings())
    finally:
        faults.set_hook(SWEEP_LOCKED_POINT, None)
    # The sweep never waits on a task row while it holds a run row (that was a deadlock): it
    # passes the run by, and the caller waiting for the row ends it.
    assert report == SweepReport()
    await assert_one_end(caller, instance, await reattached[0])
    assert await maintenance.sweep_deadlines_once(services.database, HOLD) == SweepReport()


async def test_a_caller_re_attaching_first_ends_the_run_while_the_sweep_passes_it_by(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    tool, instance = await late_run(owner, caller)
    await wait_past_deadline(caller, instance)
    reports: list[SweepReport] = []

    async def sweep_while_the_caller_holds_the_run() -> None:
        reports.append(await maintenance.sweep_deadlines_once(services.database, HOLD))

    faults.set_hook(CANCEL_LOCKED_POINT, sweep_while_the_caller_holds_the_run)
    try:
        result = await caller.call_tool("workflow_invoke", invoke_args(tool))
    finally:
        faults.set_hook(CANCEL_LOCKED_POINT, None)
    # The sweep skipped the row the caller held, and finds nothing left to end afterwards.
    assert reports == [SweepReport()]
    assert await maintenance.sweep_deadlines_once(services.database, HOLD) == SweepReport()
    await assert_one_end(caller, instance, result)


async def test_a_run_the_sweep_ends_after_a_write_replays_the_same_end_to_every_retry(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    tool, instance = await late_run(
        owner, caller, idempotencyPolicy={"kind": "derived", "resultReplayMs": 600_000}
    )
    db = services.database
    # A worker claims the run and dispatches a write, then is gone before the deadline.
    async with db.transaction() as conn:
        [(_, lease)] = await queue.claim_tasks(conn, queue.ClaimRequest("w1", 4, 2, 2, 0), HOLD)
    await service.mark_effect_possible(db, lease, 1)
    await wait_past_deadline(caller, instance)
    assert (await maintenance.sweep_deadlines_once(db, WORKER_GONE)).timed_out == 1
    first = await caller.call_tool("workflow_invoke", invoke_args(tool))
    await assert_one_end(caller, instance, first, after_effect=True)
    replayed = await caller.call_tool("workflow_invoke", invoke_args(tool))
    assert refused(replayed, "WORKFLOW_TIMEOUT") == deadline_end(instance, after_effect=True)


async def test_a_workflow_cancel_past_the_deadline_ends_the_run_as_the_deadline_did(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    _, instance = await late_run(owner, caller)
    await wait_past_deadline(caller, instance)
    args = {"workflowInstanceId": instance}
    cancelled = ok(await caller.call_tool("workflow_cancel", args))
    assert (cancelled["result"], cancelled["state"]) == ("cancelled", "CANCELLED")
    # The same stored end the sweep would have written a moment later.
    await assert_one_end(caller, instance, await caller.call_tool("workflow_get_result", args))
    assert await maintenance.sweep_deadlines_once(services.database, HOLD) == SweepReport()
