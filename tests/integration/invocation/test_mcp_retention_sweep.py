"""The retention sweep job: expired reservations and old finished runs, seen through POST /mcp."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from runtime.admission import CapacitySettings
from runtime.collaborators import Services
from runtime.composition.jobs import service_jobs
from tests.support.binding_builders import HOST, definition_yaml
from tests.support.invocation import (
    SLOW_TASK,
    invoke_args,
    ok,
    publish_tool,
    refused,
    until_settled,
)
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("000:Idempotency")

Admin = psycopg.AsyncConnection[Any]


async def _age_run(admin: Admin, process_id: str, days: int) -> None:
    """Make a finished run look as if it ended `days` ago (its window stays as it was)."""
    await admin.execute(
        "UPDATE workflow_process SET finished_ts = finished_ts - make_interval(days => %s)"
        " WHERE host_id = %s AND process_id = %s",
        (days, HOST, process_id),
    )


async def _reserved(admin: Admin, process_id: str) -> bool:
    cursor = await admin.execute(
        "SELECT 1 FROM workflow_idempotency_t WHERE host_id = %s AND process_id = %s",
        (HOST, process_id),
    )
    return await cursor.fetchone() is not None


async def _completed(caller: McpTestClient, args: dict[str, Any]) -> str:
    body = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", args)))
    return str(body["workflowInstanceId"])


async def test_the_sweep_removes_expired_reservations_and_old_runs_but_never_live_or_replayable(
    owner: McpTestClient,
    caller: McpTestClient,
    workers: object,
    admin: Admin,
    services: Services,
) -> None:
    # An old run whose window (resultReplayMs 0) has passed: swept with its reservation.
    expired_tool = await publish_tool(owner)
    expired = await _completed(caller, invoke_args(expired_tool))
    await _age_run(admin, expired, 8)
    # An old run still inside a long replay window: a retry must get its result back.
    window = {"kind": "derived", "resultReplayMs": 3_600_000}
    kept_tool = await publish_tool(owner, idempotencyPolicy=window)
    kept = await _completed(caller, invoke_args(kept_tool))
    await _age_run(admin, kept, 8)
    # A live run whose window looks over: a live run is never re-accepted, so it stays.
    slow_tool = await publish_tool(
        owner, text=definition_yaml(extra_task=SLOW_TASK), syncWaitMs=500
    )
    # What the two calls above measured on a loaded machine must not shed this one (a 3 s task
    # against a 500 ms wait: it is admitted and times out, live): no shedding from here on.
    services.admission.configure(CapacitySettings(enabled=False))
    pending = refused(
        await caller.call_tool("workflow_invoke", invoke_args(slow_tool)), "WORKFLOW_TIMEOUT"
    )
    live = pending["workflowInstanceId"]
    await admin.execute(
        "UPDATE workflow_idempotency_t SET result_replay_until = now() - interval '1 hour'"
        " WHERE host_id = %s AND process_id = %s",
        (HOST, live),
    )
    services.settings.execution.workers_enabled = False
    services.settings.execution.retention_sweep_interval_s = 0.05
    jobs = service_jobs(services)
    for job in jobs:
        job.start()
    try:
        await wait_until(
            lambda: _gone(caller, expired), what="the sweep removing the old run", within_s=10
        )
    finally:
        for job in jobs:
            await job.stop()
    assert not await _reserved(admin, expired)
    assert await _reserved(admin, kept) and await _reserved(admin, live)
    replayed = ok(await caller.call_tool("workflow_invoke", invoke_args(kept_tool)))
    assert replayed["workflowInstanceId"] == kept
    ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": live}))
    # The swept call is simply new work now.
    again = await _completed(caller, invoke_args(expired_tool))
    assert again != expired


async def _gone(caller: McpTestClient, process_id: str) -> bool:
    result = await caller.call_tool("workflow_get_status", {"workflowInstanceId": process_id})
    return bool(result["isError"]) and (
        result["structuredContent"]["error"]["code"] == "WORKFLOW_NOT_FOUND"
    )


async def test_a_reservation_swept_under_a_claim_is_inserted_again(
    owner: McpTestClient, caller: McpTestClient, workers: object, admin: Admin, database_url: str
) -> None:
    """The sweep deletes an expired reservation while a claim waits on its row lock: the claim
    must reserve the scope anew, never admit a run without a reservation."""
    tool = await publish_tool(owner)
    first = await _completed(caller, invoke_args(tool))  # its window (0 ms) is over at once
    async with await psycopg.AsyncConnection.connect(database_url) as sweeper:
        async with sweeper.transaction():
            # What the sweep does, held open: lock the expired reservation...
            await sweeper.execute(
                "SELECT 1 FROM workflow_idempotency_t WHERE host_id = %s AND process_id = %s"
                " FOR UPDATE",
                (HOST, first),
            )
            call = asyncio.create_task(caller.call_tool("workflow_invoke", invoke_args(tool)))
            await wait_until(
                lambda: _has_lock_waiter(admin), what="the claim waiting on the reservation row"
            )
            # ...then delete it and commit while the claim waits on it.
            await sweeper.execute(
                "DELETE FROM workflow_idempotency_t WHERE host_id = %s AND process_id = %s",
                (HOST, first),
            )
        result = await call
    second = str(result["structuredContent"]["workflowInstanceId"])
    assert second != first
    assert await _reserved(admin, second)


async def _has_lock_waiter(admin: Admin) -> bool:
    cursor = await admin.execute(
        "SELECT count(*) AS n FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    row = await cursor.fetchone()
    return row is not None and int(row["n"]) > 0
