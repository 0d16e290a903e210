"""A Tool's live-run counters follow its runs: in at admission, out at whatever ends them.

Admission counts a Tool's live runs from counters (migration 0025) rather than walking the
host's live-run index; a counter that drifted would refuse calls that fit, or admit past
maximumConcurrentRuns, so every end of a run must take it out again.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support.invocation import (
    CALLER,
    HOST,
    Tool,
    invoke_args,
    ok,
    publish_tool,
    refused,
    running_executor,
)
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("000:Concurrency and rate limits")

Admin = psycopg.AsyncConnection[Any]


async def _live(admin: Admin, tool: Tool) -> tuple[int, int]:
    cursor = await admin.execute(
        "SELECT workflow_tool_live_count(%(h)s, %(t)s, false, '') AS tool,"
        " workflow_tool_live_count(%(h)s, %(t)s, true, %(u)s) AS user_live,"
        " (SELECT count(*) FROM workflow_process p JOIN workflow_invocation_t i"
        "   USING (host_id, process_id) WHERE i.tool_id = %(t)s"
        "   AND p.state IN ('ACCEPTED', 'RUNNING', 'WAITING')) AS scanned",
        {"h": HOST, "t": tool.tool_id, "u": CALLER},
    )
    row = await cursor.fetchone()
    assert row is not None
    assert row["tool"] == row["scanned"], row  # the counter says what a scan would
    return int(row["tool"]), int(row["user_live"])


async def test_runs_that_complete_leave_the_live_counts(
    owner: McpTestClient, caller: McpTestClient, admin: Admin, services: Any
) -> None:
    tool = await publish_tool(owner)
    async with running_executor(services):
        for n in range(3):
            ok(await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": n})))
    assert await _live(admin, tool) == (0, 0)


async def test_a_live_run_is_counted_until_any_end_takes_it_out(
    owner: McpTestClient, caller: McpTestClient, admin: Admin
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50)
    first = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": 1})),
        "WORKFLOW_TIMEOUT",
    )
    refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": 2})),
        "WORKFLOW_TIMEOUT",
    )
    assert await _live(admin, tool) == (2, 2)
    # Whatever path ends a run changes its state; the counter follows the state, once.
    await admin.execute(
        "UPDATE workflow_process SET state = 'CANCELLED', finished_ts = now()"
        " WHERE process_id = %s",
        (first["workflowInstanceId"],),
    )
    assert await _live(admin, tool) == (1, 1)
    await admin.execute(
        "UPDATE workflow_process SET state = 'FAILED' WHERE process_id = %s",
        (first["workflowInstanceId"],),
    )
    assert await _live(admin, tool) == (1, 1)


async def test_concurrent_writers_of_one_tools_counters_never_wait_on_each_other(
    database_url: str, admin: Admin
) -> None:
    # Nine transactions in progress at once add to one Tool's and one user's counters (nine:
    # two of them would share a shard under migration 0025's pg_backend_pid() % 8). None may
    # wait for another's commit: each writes a shard no other transaction in progress writes
    # (migration 0027). The counts are the sum of what they added.
    tool_id, subject = "00000000-0000-4000-8000-00000000c0de", "user-9"
    writers = [
        await psycopg.AsyncConnection.connect(database_url, row_factory=dict_row) for _ in range(9)
    ]
    try:
        for conn in writers:
            await conn.execute("SET lock_timeout = '2s'")
            await conn.execute(
                "SELECT workflow_tool_live_add(%s, %s, %s, 1)", (HOST, tool_id, subject)
            )
            # The same transaction again (several run ends in one statement) keeps its shard.
            await conn.execute(
                "SELECT workflow_tool_live_add(%s, %s, %s, 1)", (HOST, tool_id, subject)
            )
        for conn in writers:
            await conn.commit()
    finally:
        for conn in writers:
            await conn.close()
    cursor = await admin.execute(
        "SELECT workflow_tool_live_count(%(h)s, %(t)s, false, '') AS tool,"
        " workflow_tool_live_count(%(h)s, %(t)s, true, %(u)s) AS user_live,"
        " (SELECT count(DISTINCT shard) FROM workflow_tool_live_count_t"
        "   WHERE tool_id = %(t)s AND NOT per_user) AS shards",
        {"h": HOST, "t": tool_id, "u": subject},
    )
    row = await cursor.fetchone()
    assert row == {"tool": 18, "user_live": 18, "shards": 9}
