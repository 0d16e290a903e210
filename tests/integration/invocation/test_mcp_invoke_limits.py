"""Admission limits of workflow-backed Tools (seed 000 Concurrency and rate limits)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from tests.support.invocation import client, invoke_args, ok, publish_tool, refused
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("000:Concurrency and rate limits")


def limits(concurrent: int, per_user: int, per_minute: int, per_minute_user: int) -> dict[str, int]:
    """An admissionLimits object."""
    return {
        "maximumConcurrentRuns": concurrent,
        "maximumConcurrentRunsPerUser": per_user,
        "startsPerMinute": per_minute,
        "startsPerMinutePerUser": per_minute_user,
    }


def numbered(tool: Any, n: int) -> dict[str, Any]:
    """Arguments whose input differs by n (a distinct derived key per n)."""
    return invoke_args(tool, {"claimId": f"C-{n}"})


async def test_the_concurrent_limit_refuses_with_retry_after_and_re_attaches_do_not_count(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=limits(2, 2, 120, 10))
    for n in (1, 2):
        refused(await caller.call_tool("workflow_invoke", numbered(tool, n)), "WORKFLOW_TIMEOUT")
    full = refused(
        await caller.call_tool("workflow_invoke", numbered(tool, 3)), "WORKFLOW_CAPACITY_EXHAUSTED"
    )
    assert full["error"]["retryable"] is True
    assert full["error"]["retryAfterMs"] > 0
    assert "workflowInstanceId" not in full
    # The same call as the first re-attaches to its run instead of counting as a start.
    refused(await caller.call_tool("workflow_invoke", numbered(tool, 1)), "WORKFLOW_TIMEOUT")


async def test_the_per_user_concurrent_limit_leaves_room_for_other_users(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=limits(5, 1, 120, 10))
    refused(await caller.call_tool("workflow_invoke", numbered(tool, 1)), "WORKFLOW_TIMEOUT")
    refused(
        await caller.call_tool("workflow_invoke", numbered(tool, 2)), "WORKFLOW_CAPACITY_EXHAUSTED"
    )
    other = client(http, dev_identity, "caller-2")
    refused(await other.call_tool("workflow_invoke", numbered(tool, 2)), "WORKFLOW_TIMEOUT")


async def test_the_per_minute_limit_counts_starts_across_revisions(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    tool = await publish_tool(owner, admissionLimits=limits(5, 5, 2, 2))
    ok(await caller.call_tool("workflow_invoke", numbered(tool, 1)))
    renamed = await publish_tool(
        owner,
        tool_id=tool.tool_id,
        wf_def_id=tool.wf_def_id,
        version="1.3.0",
        expected_version=tool.aggregate_version,
        admissionLimits=limits(5, 5, 2, 2),
    )
    ok(await caller.call_tool("workflow_invoke", numbered(renamed, 2)))
    full = refused(
        await caller.call_tool("workflow_invoke", numbered(renamed, 3)),
        "WORKFLOW_CAPACITY_EXHAUSTED",
    )
    assert 0 < full["error"]["retryAfterMs"] <= 60000


async def test_the_per_minute_limit_counts_every_users_starts_not_only_the_callers(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
) -> None:
    # Two starts a minute for the Tool, two per user: a third user, who started nothing yet,
    # is refused by the Tool's own count (the per-user count alone would let them in).
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=limits(5, 5, 2, 2))
    refused(await caller.call_tool("workflow_invoke", numbered(tool, 1)), "WORKFLOW_TIMEOUT")
    second = client(http, dev_identity, "caller-2")
    refused(await second.call_tool("workflow_invoke", numbered(tool, 2)), "WORKFLOW_TIMEOUT")
    third = client(http, dev_identity, "caller-3")
    full = refused(
        await third.call_tool("workflow_invoke", numbered(tool, 3)), "WORKFLOW_CAPACITY_EXHAUSTED"
    )
    assert "starts per minute" in full["error"]["message"]
    assert 0 < full["error"]["retryAfterMs"] <= 60000


async def test_parallel_admissions_cannot_exceed_the_concurrent_cap(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=limits(3, 3, 120, 120))
    callers = [client(wide, dev_identity, f"racer-{n % 4}") for n in range(12)]
    results = await asyncio.gather(
        *(racer.call_tool("workflow_invoke", numbered(tool, n)) for n, racer in enumerate(callers))
    )
    codes = [result["structuredContent"]["error"]["code"] for result in results]
    assert codes.count("WORKFLOW_TIMEOUT") == 3, codes
    assert codes.count("WORKFLOW_CAPACITY_EXHAUSTED") == 9, codes
    async with services.database.transaction() as conn:
        cursor = await conn.execute("SELECT count(*) AS n FROM workflow_process")
        row = await cursor.fetchone()
    assert row is not None and row["n"] == 3
