"""A Tool's start buckets: closed ones fold into one row each, and the count stays the same."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg

from tests.support.invocation import HOST, invoke_args, ok, publish_tool
from tests.support.mcp import McpTestClient

BUCKET_S = 10


async def test_the_first_admission_of_a_bucket_folds_the_closed_buckets_of_the_window(
    owner: McpTestClient,
    caller: McpTestClient,
    workers: object,
    admin: psycopg.AsyncConnection[Any],
) -> None:
    limits = {
        "maximumConcurrentRuns": 100,
        "maximumConcurrentRunsPerUser": 100,
        "startsPerMinute": 1000,
        "startsPerMinutePerUser": 1000,
    }
    tool = await publish_tool(owner, admissionLimits=limits)
    # Twenty seconds ago, five admissions in progress at once wrote five shards of a bucket.
    closed = int(time.time()) // BUCKET_S * BUCKET_S - 2 * BUCKET_S
    for shard in range(5):
        await admin.execute(
            "INSERT INTO workflow_tool_start_count_t (host_id, tool_id, per_user,"
            " end_user_subject, second, shard, starts) VALUES (%s, %s, false, '', %s, %s, %s)",
            (HOST, tool.tool_id, closed, shard, shard + 1),
        )
    # Admissions fold in the first second of a bucket: call right after the next one opens.
    while time.time() % BUCKET_S > 0.2:
        await asyncio.sleep(0.02)
    ok(await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-1"})))

    cursor = await admin.execute(
        "SELECT shard, starts FROM workflow_tool_start_count_t WHERE host_id = %s"
        " AND tool_id = %s AND NOT per_user AND second = %s",
        (HOST, tool.tool_id, closed),
    )
    assert [(row["shard"], row["starts"]) for row in await cursor.fetchall()] == [(-1, 15)]
