"""Seed 001 Phase 1 exit gates that need no Gateway, against real service processes.

"capacity exhaustion rejects before starting or queueing" and the executor-crash gate as it
applies to this service: a Workflow process killed during a run is recovered by another
process sharing the database, and the caller's retry gets the result.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import OWNER
from tests.support.invocation import client, ok, refused, until_settled
from tests.support.live_gates import (
    admission_totals,
    answering,
    kill_child,
    queued_longer_than,
    running_worker_pid,
    service_processes,
)
from tests.support.live_stack import QualStack
from tests.support.live_tools import (
    REPLAYING,
    get_definition,
    invoke,
    limits,
    publish_live_tool,
    runs_of,
)
from tests.support.mcp import McpTestClient
from tests.support.scale_out import scalar
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.requirement("001:Phase 1 exit gates"), pytest.mark.timeout(150)]

ROOMY = limits(1000, 1000, 1000, 1000)
# Deadline-aware admission with its defaults (no fixed queue-wait objective) and one
# interactive slot: a queue that has aged past the Tool's 1 s syncWaitMs refuses new calls.
QUEUE_AWARE = {
    "WORKFLOW_CAPACITY_ENABLED": "true",
    "WORKFLOW_CAPACITY_LOOP_LAG_TURNS": "0",
    "WORKFLOW_EXECUTION_INTERACTIVE_SLOTS": "1",
}


async def test_gate_capacity_exhaustion_rejects_before_starting(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """Phase 1 exit gate: "capacity exhaustion rejects before starting or queueing" (the
    Tool's admission limit): the refusal writes no run, task, reservation or credential."""
    uri = qual_stack.unique_path("gate-limit")
    tool = await publish_live_tool(
        owner, get_definition(uri), (uri,), syncWaitMs=500, admissionLimits=limits(1, 1, 120, 10)
    )
    qual_stack.backend.hold(uri)
    try:
        refused(await invoke(caller, tool, {"claimId": "C-1"}), "WORKFLOW_TIMEOUT")
        before = await admission_totals(qual_stack.database_url)
        body = refused(
            await invoke(caller, tool, {"claimId": "C-2"}), "WORKFLOW_CAPACITY_EXHAUSTED"
        )
        assert body["status"] == "rejected" and "workflowInstanceId" not in body
        assert body["error"]["retryAfterMs"] > 0
        assert await admission_totals(qual_stack.database_url) == before
    finally:
        qual_stack.backend.release(uri)
    assert await qual_stack.count(*runs_of(tool)) == 1
    assert len(qual_stack.backend.requests_to(uri)) == 1


async def test_gate_capacity_exhaustion_rejects_before_queueing(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    """Phase 1 exit gate: "capacity exhaustion rejects before starting or queueing" (the
    service's deadline-aware admission): with its one interactive slot busy and a run queued
    behind it, the next call is refused and nothing is queued for it."""
    with service_processes(database_url, tmp_path, live_identity, 1, QUEUE_AWARE) as processes:
        async with httpx.AsyncClient(base_url=processes.servers[0].base_url, timeout=60) as http:
            owner, caller = client(http, live_identity, OWNER), client(http, live_identity)
            uri = f"{processes.backend_origin}/gate-queue"
            tool = await publish_live_tool(
                owner, get_definition(uri), (uri,), syncWaitMs=1000, admissionLimits=ROOMY
            )
            processes.backend.hold(uri)
            try:
                refused(await invoke(caller, tool, {"claimId": "C-1"}), "WORKFLOW_TIMEOUT")
                queued = refused(await invoke(caller, tool, {"claimId": "C-2"}), "WORKFLOW_TIMEOUT")
                await wait_until(
                    lambda: queued_longer_than(database_url, queued["workflowInstanceId"], 1000),
                    what="the second run queued behind the busy slot for a second",
                )
                before = await admission_totals(database_url)
                body = refused(
                    await invoke(caller, tool, {"claimId": "C-3"}), "WORKFLOW_CAPACITY_EXHAUSTED"
                )
                assert "cannot finish this call within its deadline" in body["error"]["message"]
                assert body["error"]["retryAfterMs"] > 0 and "workflowInstanceId" not in body
                assert await admission_totals(database_url) == before
            finally:
                processes.backend.release(uri)


async def test_gate_killed_workflow_process_is_recovered_by_another(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    """Phase 1 exit gate (executor crash), for this service: two service processes share one
    database; the one running a task is killed with SIGKILL mid-call; the other reclaims and
    finishes the run, and the caller's retry gets that run's result."""
    with service_processes(database_url, tmp_path, live_identity, 2) as processes:
        servers = processes.servers
        async with httpx.AsyncClient(base_url=servers[0].base_url, timeout=60) as http:
            owner, caller = client(http, live_identity, OWNER), client(http, live_identity)
            uri = f"{processes.backend_origin}/gate-kill"
            tool = await publish_live_tool(
                owner, get_definition(uri), (uri,), syncWaitMs=1000, idempotencyPolicy=REPLAYING
            )
            processes.backend.hold(uri)
            try:
                first = refused(await invoke(caller, tool), "WORKFLOW_TIMEOUT")
                instance = first["workflowInstanceId"]
                await wait_until(
                    lambda: len(processes.backend.requests_to(uri)) == 1,
                    what="the run's call at the backend",
                    within_s=30,
                )
                pid = await running_worker_pid(database_url, instance)
                assert pid is not None
                kill_child(pid)
                await wait_until(
                    lambda: sum(answering(server) for server in servers) == 1,
                    what="the killed process gone",
                    within_s=30,
                )
            finally:
                processes.backend.release(uri)
        survivor = next(server for server in servers if answering(server))
        async with httpx.AsyncClient(base_url=survivor.base_url, timeout=60) as http:
            retry = client(http, live_identity)
            done = ok(await until_settled(lambda: invoke(retry, tool), within_s=60))
    assert done["status"] == "completed"
    assert done["workflowInstanceId"] == instance
    assert len(processes.backend.requests_to(uri)) == 2  # the reclaimed attempt called again
    attempts = "SELECT attempts FROM workflow_task WHERE process_id = %s"
    assert await scalar(database_url, attempts, instance) >= 2
    runs_sql, binding_id = runs_of(tool)
    assert await scalar(database_url, runs_sql, binding_id) == 1
