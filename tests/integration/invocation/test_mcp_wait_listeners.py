"""The result waiter's LISTEN connections are bounded by a setting (seed 001 Invocation State)."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from runtime.execution import configure_waiter
from runtime.execution.waiter import shard_index
from runtime.store import Database
from tests.support.binding_builders import definition_yaml
from tests.support.invocation import SLOW_TASK, invoke_args, ok, publish_tool, until_settled
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Invocation State")

Admin = psycopg.AsyncConnection[Any]


async def _result_listeners(admin: Admin) -> int:
    cursor = await admin.execute(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database()"
        " AND query LIKE 'LISTEN \"workflow_process_state_%'"
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


async def _listener_pids(admin: Admin) -> set[int]:
    cursor = await admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND query LIKE 'LISTEN \"workflow_process_state_%'"
    )
    return {int(row["pid"]) for row in await cursor.fetchall()}


async def test_with_no_listener_connections_waiters_poll_durable_status(
    db: Database, owner: McpTestClient, caller: McpTestClient, workers: object, admin: Admin
) -> None:
    configure_waiter(db, listener_connections=0)
    # A run that outlives the first read, so the waiter must see its end by polling.
    tool = await publish_tool(owner, text=definition_yaml(extra_task=SLOW_TASK))
    body = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool))))
    assert body["status"] == "completed"
    assert await _result_listeners(admin) == 0


async def test_a_positive_bound_opens_that_many_listener_connections(
    db: Database, owner: McpTestClient, caller: McpTestClient, workers: object, admin: Admin
) -> None:
    configure_waiter(db, listener_connections=8)
    tool = await publish_tool(owner)
    body = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool))))
    assert body["status"] == "completed"
    assert await _result_listeners(admin) == 8


# Room for the runs below: the builder's per-user limits would refuse them.
ROOMY_LIMITS = {
    "maximumConcurrentRuns": 50,
    "maximumConcurrentRunsPerUser": 20,
    "startsPerMinute": 600,
    "startsPerMinutePerUser": 600,
}


async def _invoke_batch(caller: McpTestClient, tool: Any, prefix: str) -> set[str]:
    """Six concurrent invocations with distinct inputs; every one completes."""

    async def one(n: int) -> str:
        args = invoke_args(tool, {"claimId": f"{prefix}-{n}"})
        body = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", args)))
        assert body["status"] == "completed"
        return str(body["workflowInstanceId"])

    return set(await asyncio.gather(*(one(n) for n in range(6))))


async def _invoke_until_every_listener_is_used(caller: McpTestClient, tool: Any) -> set[str]:
    """Invoke in concurrent batches until the runs hash to all 3 listeners."""
    ids: set[str] = set()
    batch = 0
    while len(ids) < 9 or {shard_index(i, 3) for i in ids} != {0, 1, 2}:
        batch += 1
        assert batch < 20, "the run ids never covered all three listeners"
        ids |= await _invoke_batch(caller, tool, f"C{batch}")
    return ids


async def test_waiters_are_spread_over_n_listener_connections(
    db: Database, owner: McpTestClient, caller: McpTestClient, workers: object, admin: Admin
) -> None:
    configure_waiter(db, listener_connections=3)
    tool = await publish_tool(owner, admissionLimits=ROOMY_LIMITS)
    ids = await _invoke_until_every_listener_is_used(caller, tool)
    assert len(ids) >= 9
    assert await _result_listeners(admin) == 3


async def test_a_dropped_listener_reconnects_and_its_waiters_still_get_results(
    db: Database, owner: McpTestClient, caller: McpTestClient, workers: object, admin: Admin
) -> None:
    configure_waiter(db, listener_connections=3)
    tool = await publish_tool(owner, admissionLimits=ROOMY_LIMITS)
    await _invoke_until_every_listener_is_used(caller, tool)
    before = await _listener_pids(admin)
    dropped = min(before)
    await admin.execute("SELECT pg_terminate_backend(%s)", (dropped,))

    async def reconnected() -> bool:
        pids = await _listener_pids(admin)
        return len(pids) == 3 and dropped not in pids

    await wait_until(reconnected, what="the dropped listener to reconnect")
    # Only the dropped connection was replaced: the other two listeners never noticed.
    assert before - {dropped} <= await _listener_pids(admin)
    assert len(await _invoke_batch(caller, tool, "D")) == 6
