"""A run's first task is claimed by the admission itself when a local slot is free (issue 20).

workflow_invoke's statement inserts the first task already claimed by this process's executor
when one of its slots of the class is free and no ready task waits (migrations 0019, 0026): no
claim statement and no second commit stand between admission and the task. Otherwise the task
is left ready for the fair claim, so nothing is ever skipped ahead of.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from runtime.collaborators import Services
from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.scheduler import Executor, SchedulerSettings
from runtime.scheduler.models import BudgetAmounts, NewTask
from tests.support.invocation import invoke_args, ok, publish_tool
from tests.support.mcp import McpTestClient
from tests.support.scheduler import enqueue
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Capacity And Availability")

# Only a wake-up makes this executor claim: a claim round is then something this process did.
PARKED = SchedulerSettings(poll_interval_ms=60_000, batch_slots=0, borrow_slots=0)


@asynccontextmanager
async def parked_executor(services: Services) -> AsyncIterator[Executor]:
    """An executor of the workflow tasks that claims only when woken (never on a timer)."""
    runtime = WorkflowRuntime(
        ExecutionSettings(),
        services.keyring,
        destinations=services.settings.publication.destinations.address_policy(),
        resolver=services.resolver,
    )
    async with Executor(services.database, runtime.handlers(), PARKED) as executor:
        # The first claim round at start is not one of the calls'.
        await wait_until(lambda: executor.claim_rounds >= 1, what="the executor's first round")
        yield executor
    await runtime.aclose()


async def _first_task(admin: psycopg.AsyncConnection[Any], process_id: str) -> dict[str, Any]:
    row = await (
        await admin.execute(
            "SELECT state, attempts, worker_id FROM workflow_task"
            " WHERE process_id = %s AND step_no = 0",
            (process_id,),
        )
    ).fetchone()
    assert row is not None
    return dict(row)


async def test_with_a_free_slot_the_first_task_needs_no_claim_round(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    admin: psycopg.AsyncConnection[Any],
) -> None:
    tool = await publish_tool(owner)
    async with parked_executor(services) as executor:
        rounds = executor.claim_rounds
        for n in range(3):
            body = ok(await caller.call_tool("workflow_invoke", invoke_args(tool, {"n": n})))
            assert body["status"] == "completed"
            task = await _first_task(admin, body["workflowInstanceId"])
            assert task == {"state": "done", "attempts": 1, "worker_id": executor.worker_id}
        assert executor.claim_rounds == rounds
        assert executor.free_slots("interactive") == PARKED.interactive_slots


async def test_when_ready_work_waits_the_first_task_is_left_for_the_fair_claim(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    admin: psycopg.AsyncConnection[Any],
) -> None:
    tool = await publish_tool(owner)
    async with parked_executor(services) as executor:
        # A batch task this executor has no slot for stays ready in the queue all along.
        await enqueue(
            services.database,
            host_id=str(uuid.uuid4()),
            first_task=NewTask("echo", {}),
            execution_class="batch",
            budget=BudgetAmounts(attempts=1),
        )
        rounds = executor.claim_rounds
        body = ok(await caller.call_tool("workflow_invoke", invoke_args(tool)))
        assert body["status"] == "completed"
        # Left ready, announced, and claimed by a claim round of the fair claim query.
        assert executor.claim_rounds > rounds
        task = await _first_task(admin, body["workflowInstanceId"])
        assert task["state"] == "done" and task["worker_id"] == executor.worker_id


async def test_without_a_free_slot_the_first_task_is_left_ready_until_one_frees(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    admin: psycopg.AsyncConnection[Any],
) -> None:
    tool = await publish_tool(owner)
    async with parked_executor(services) as executor:
        held = [executor.reserve("interactive") for _ in range(PARKED.interactive_slots)]
        assert None not in held and executor.reserve("interactive") is None
        call = asyncio.create_task(caller.call_tool("workflow_invoke", invoke_args(tool)))

        async def left_ready() -> bool:
            row = await (
                await admin.execute(
                    "SELECT count(*) AS n FROM workflow_task t"
                    " JOIN workflow_process p USING (host_id, process_id)"
                    " WHERE t.state = 'ready' AND p.state = 'ACCEPTED'"
                )
            ).fetchone()
            return row is not None and row["n"] == 1

        await wait_until(left_ready, what="the first task left ready")
        for reservation in held:
            assert reservation is not None
            reservation.release()
            reservation.release()  # a second release gives nothing back twice
        body = ok(await call)
        assert body["status"] == "completed"
        assert executor.free_slots("interactive") == PARKED.interactive_slots


async def test_a_slot_kept_for_an_admission_is_not_filled_by_the_claim_loop(
    services: Services,
) -> None:
    async with parked_executor(services) as executor:
        free = executor.free_slots("interactive")
        reservation = executor.reserve("interactive")
        assert reservation is not None
        assert executor.free_slots("interactive") == free - 1
        reservation.release()
        assert executor.free_slots("interactive") == free
        assert executor.reserve("batch") is None  # PARKED has no batch slot
    # A stopped executor keeps no slot for anyone.
    assert executor.reserve("interactive") is None
