"""workflow_cancel before effects races the first effect: never both a cancel and a dispatch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime.scheduler import service
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.lease import LeaseState
from runtime.scheduler.models import SchedulerSettings
from runtime.scheduler.store import queue
from runtime.store import Database
from tests.support.binding_builders import definition_yaml, new_id
from tests.support.invocation import ok, refused, save_head
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("000:Waiting, timeout and re-attach")

ROUNDS = 25
TURNS = 8
# Leases outlast the test, so a run an earlier round left running is never claimed again.
HOLD = SchedulerSettings(lease_ms=600_000, tenant_limit=ROUNDS + 1)


async def _claim_first_task(db: Database) -> LeaseState:
    """Claim the only queued task as a worker about to dispatch its first effect would."""
    async with db.transaction() as conn:
        [(_, lease)] = await queue.claim_tasks(conn, queue.ClaimRequest("w1", 4, 2, 2, 0), HOLD)
    return lease


async def _dispatch(db: Database, lease: LeaseState, turns: int) -> bool:
    """Mark the first effect possible (the fenced step before a write leaves the worker).

    It starts after turns event-loop turns, so successive rounds move it along the cancel's
    path through the endpoint and both orders (and the overlap between them) are raced.
    """
    for _ in range(turns):
        await asyncio.sleep(0)
    try:
        await service.mark_effect_possible(db, lease, 1)
    except LeaseLost:
        return False
    return True


async def _cancel(caller: McpTestClient, instance: dict[str, str]) -> bool:
    """workflow_cancel through POST /mcp; True when it ended the run."""
    result = await caller.call_tool("workflow_cancel", instance)
    if result["isError"]:
        refused(result, "WORKFLOW_STATE_CONFLICT")
        return False
    assert ok(result)["result"] == "cancelled", result
    return True


async def test_a_cancel_and_a_first_effect_never_both_win(
    db: Database, owner: McpTestClient, caller: McpTestClient
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    for round_no in range(ROUNDS):
        receipt = ok(
            await caller.call_tool(
                "workflow_start", {"wfDefId": wf_def_id, "input": {"claimId": "C-1"}}
            )
        )
        instance = {"workflowInstanceId": receipt["workflowInstanceId"]}
        lease = await _claim_first_task(db)
        cancelled, dispatched = await asyncio.gather(
            _cancel(caller, instance), _dispatch(db, lease, round_no * TURNS)
        )
        status: dict[str, Any] = ok(await caller.call_tool("workflow_get_status", instance))
        # Exactly one side wins, and the run's public state agrees with the winner.
        assert cancelled != dispatched, (cancelled, dispatched, status)
        assert status["state"] == ("CANCELLED" if cancelled else "RUNNING"), status
