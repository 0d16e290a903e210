"""Admission limits stay exact under races: N+1 parallel admissions against N remaining slots.

Admission is one statement whose per-Tool lock is taken after the run is written and held only
through the count and the commit (migration 0025); these tests race it on a pool of many
connections for each of the four admissionLimits and assert that exactly one call is refused,
that the refusal wrote nothing, and that no limit is ever overspent.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from tests.support.invocation import Tool, client, invoke_args, publish_tool, refused
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("000:Concurrency and rate limits")

ROUNDS = 3
REMAINING = 4
PLENTY = 1_000


def limits(**given: int) -> dict[str, int]:
    """admissionLimits with every limit not given out of reach."""
    values = {
        "maximumConcurrentRuns": PLENTY,
        "maximumConcurrentRunsPerUser": PLENTY,
        "startsPerMinute": PLENTY,
        "startsPerMinutePerUser": PLENTY,
    }
    values.update(given)
    # Publication refuses a per-user limit above its Tool-wide one.
    for tool_wide, per_user in (
        ("maximumConcurrentRuns", "maximumConcurrentRunsPerUser"),
        ("startsPerMinute", "startsPerMinutePerUser"),
    ):
        values[per_user] = min(values[per_user], values[tool_wide])
    return values


async def _rows(services: Services, tool: Tool) -> tuple[int, int]:
    """The Tool's admitted runs and idempotency reservations."""
    async with services.database.transaction() as conn:
        cursor = await conn.execute(
            "SELECT (SELECT count(*) FROM workflow_invocation_t WHERE tool_id = %(tool)s) AS runs,"
            " (SELECT count(*) FROM workflow_idempotency_t i JOIN workflow_invocation_t v"
            "   ON v.host_id = i.host_id AND v.process_id = i.process_id"
            "   WHERE v.tool_id = %(tool)s) AS reservations",
            {"tool": tool.tool_id},
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row["runs"]), int(row["reservations"])


async def _race(
    tool: Tool, callers: list[McpTestClient], first: int, count: int
) -> list[dict[str, Any]]:
    calls = [
        callers[n % len(callers)].call_tool(
            "workflow_invoke", invoke_args(tool, {"claimId": f"C-{first + n}"})
        )
        for n in range(count)
    ]
    return [result["structuredContent"] for result in await asyncio.gather(*calls)]


async def _exactly_one_refused(
    owner: McpTestClient,
    services: Services,
    callers: list[McpTestClient],
    admission_limits: dict[str, int],
    cap: int,
) -> None:
    """Fill a Tool to cap - REMAINING, race REMAINING + 1 calls, check the invariant."""
    for _ in range(ROUNDS):
        tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=admission_limits)
        for n in range(cap - REMAINING):
            # Without an executor each run stays live: it holds a concurrent slot and a start.
            refused(
                await callers[0].call_tool("workflow_invoke", invoke_args(tool, {"claimId": n})),
                "WORKFLOW_TIMEOUT",
            )
        bodies = await _race(tool, callers, cap, REMAINING + 1)
        codes = sorted(body["error"]["code"] for body in bodies)
        assert codes == ["WORKFLOW_CAPACITY_EXHAUSTED"] + ["WORKFLOW_TIMEOUT"] * REMAINING, codes
        (full,) = [b for b in bodies if b["error"]["code"] == "WORKFLOW_CAPACITY_EXHAUSTED"]
        assert full["error"]["retryAfterMs"] > 0 and "workflowInstanceId" not in full
        # The refused call left no run and no reservation behind: never overspent.
        assert await _rows(services, tool) == (cap, cap)


async def test_racing_admissions_never_overspend_the_concurrent_cap(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    callers = [client(wide, dev_identity, f"racer-{n}") for n in range(REMAINING + 1)]
    await _exactly_one_refused(owner, services, callers, limits(maximumConcurrentRuns=6), 6)


async def test_racing_admissions_never_overspend_the_per_user_concurrent_cap(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    callers = [client(wide, dev_identity, "one-user")]
    cap = limits(maximumConcurrentRunsPerUser=5)
    await _exactly_one_refused(owner, services, callers, cap, 5)


async def test_racing_admissions_never_overspend_the_starts_per_minute(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    callers = [client(wide, dev_identity, f"racer-{n}") for n in range(REMAINING + 1)]
    await _exactly_one_refused(owner, services, callers, limits(startsPerMinute=6), 6)


async def test_racing_admissions_never_overspend_the_per_user_starts_per_minute(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    callers = [client(wide, dev_identity, "one-user")]
    cap = limits(startsPerMinutePerUser=5)
    await _exactly_one_refused(owner, services, callers, cap, 5)


async def test_racing_admissions_count_their_starts_in_their_own_connections_shards(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    # Every admission of a Tool updated the one row of its second, holding its lock through
    # the commit's WAL flush, so a popular Tool's admissions queued on it (migration 0026).
    callers = [client(wide, dev_identity, f"racer-{n}") for n in range(8)]
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=limits())
    bodies = await _race(tool, callers, 0, 24)
    assert {body["error"]["code"] for body in bodies} == {"WORKFLOW_TIMEOUT"}
    async with services.database.transaction() as conn:
        cursor = await conn.execute(
            "SELECT count(DISTINCT shard) AS shards, sum(starts) AS starts,"
            " workflow_tool_starts_since(host_id, tool_id, false, '', min(second)) AS counted"
            " FROM workflow_tool_start_count_t"
            " WHERE tool_id = %(tool)s AND NOT per_user GROUP BY host_id, tool_id",
            {"tool": tool.tool_id},
        )
        row = await cursor.fetchone()
    assert row is not None
    # The starts are spread over the connections' shards and still add up exactly.
    assert row["shards"] > 1 and row["starts"] == row["counted"] == 24, row
    assert await _rows(services, tool) == (24, 24)
