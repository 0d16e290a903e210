"""The Tool's admission lock: shared far from every limit, exclusive near one, never overspent.

At most workflow_admission_batch_max() admissions per server connection are in progress at any
instant (one transaction admits a batch at most that large), so an admission whose counts stay
more than that many times max_connections under every limit cannot overspend one and takes the
Tool's lock in shared mode (a popular Tool's admissions never wait on each other); near a limit
the lock is exclusive and the count exact (migrations 0025, 0084).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import psycopg
import pytest

from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from tests.support.invocation import HOST, Tool, client, invoke_args, publish_tool, refused
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("000:Concurrency and rate limits")

Admin = psycopg.AsyncConnection[Any]
REMAINING = 4


def _key(tool: Tool) -> str:
    return f"workflow-tool-admission:{HOST}:{tool.tool_id}"


async def _in_flight_bound(admin: Admin) -> int:
    """The admissions other transactions may have in progress at most (migration 0084)."""
    query = "SELECT current_setting('max_connections')::int * workflow_admission_batch_max() AS n"
    row = await (await admin.execute(query)).fetchone()
    assert row is not None
    return int(row["n"])


async def _lock_waiters(admin: Admin) -> bool:
    """Whether a session waits for an advisory lock (an admission for the Tool's lock)."""
    query = "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    row = await (await admin.execute(query)).fetchone()
    return row is not None and int(row["n"]) > 0


def _limits(concurrent: int) -> dict[str, int]:
    return {
        "maximumConcurrentRuns": concurrent,
        "maximumConcurrentRunsPerUser": concurrent,
        "startsPerMinute": 1_000_000,
        "startsPerMinutePerUser": 1_000_000,
    }


async def _call(caller: McpTestClient, tool: Tool, n: int) -> dict[str, Any]:
    result = await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": f"C-{n}"}))
    return dict(result["structuredContent"])


async def test_an_admission_far_from_every_limit_takes_the_tool_lock_shared(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, admin: Admin
) -> None:
    far = await _in_flight_bound(admin) * 2
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=_limits(far))
    caller = client(wide, dev_identity, "far-caller")
    await admin.execute("SELECT pg_advisory_lock_shared(hashtextextended(%s, 0))", (_key(tool),))
    try:
        # Another shared holder does not keep it out.
        async with asyncio.timeout(10):
            assert (await _call(caller, tool, 1))["error"]["code"] == "WORKFLOW_TIMEOUT"
    finally:
        await admin.execute(
            "SELECT pg_advisory_unlock_shared(hashtextextended(%s, 0))", (_key(tool),)
        )
    await admin.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (_key(tool),))
    try:
        # An exclusive holder (an admission near a limit) does.
        call = asyncio.create_task(_call(caller, tool, 2))
        # Seen waiting for the Tool's lock, it is kept out (and has not ended meanwhile).
        await wait_until(
            lambda: _lock_waiters(admin), what="the admission waiting for the Tool's lock"
        )
        assert not call.done()
    finally:
        await admin.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (_key(tool),))
    async with asyncio.timeout(10):
        assert (await call)["error"]["code"] == "WORKFLOW_TIMEOUT"


async def _fill_live_runs(admin: Admin, tool: Tool, count: int) -> None:
    """count live runs of the Tool, as admission would have left them (no executor runs)."""
    params = {
        "host": HOST,
        "count": count,
        "tool": tool.tool_id,
        "binding": tool.binding_id,
        "wf_def": tool.wf_def_id,
        "digest": tool.definition_digest,
    }
    await admin.execute(
        """
        WITH runs AS (
            INSERT INTO workflow_process (host_id, process_id, execution_class, deadline_ts, state)
            SELECT %(host)s, gen_random_uuid(), 'interactive', now() + interval '1 hour', 'RUNNING'
            FROM generate_series(1, %(count)s)
            RETURNING host_id, process_id
        )
        INSERT INTO workflow_invocation_t (
            host_id, process_id, operation, user_id, end_user_subject, principal_subject,
            tool_id, binding_id, wf_def_id, workflow_version, definition_digest
        )
        SELECT host_id, process_id, 'invoke', 'filler', 'filler', 'filler', %(tool)s,
               %(binding)s, %(wf_def)s, '1.2.0', %(digest)s
        FROM runs
        """,
        params,
    )
    # Admission counts its runs in as it writes them (migration 0025's live counters).
    await admin.execute(
        "SELECT workflow_tool_live_add(%(host)s, %(tool)s, 'filler', %(count)s)", params
    )


async def test_racing_admissions_near_a_limit_above_max_connections_never_overspend_it(
    owner: McpTestClient,
    wide: httpx.AsyncClient,
    dev_identity: DevIdentity,
    admin: Admin,
    services: Services,
) -> None:
    # A limit large enough for the shared lock while the Tool is idle, reached for real here:
    # the admissions start shared, find themselves near it, and finish exclusive and exact
    # (the ones that waited while the first statement was in flight went as a batch, which
    # answers near_limit for each: each is repeated alone).
    cap = await _in_flight_bound(admin) + 2 * REMAINING
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=_limits(cap))
    await _fill_live_runs(admin, tool, cap - REMAINING)
    callers = [client(wide, dev_identity, f"racer-{n}") for n in range(REMAINING + 1)]
    async with asyncio.timeout(30):
        bodies = await asyncio.gather(*(_call(racer, tool, n) for n, racer in enumerate(callers)))
    codes = sorted(body["error"]["code"] for body in bodies)
    assert codes == ["WORKFLOW_CAPACITY_EXHAUSTED"] + ["WORKFLOW_TIMEOUT"] * REMAINING, codes
    row = await (
        await admin.execute(
            "SELECT count(*) AS n FROM workflow_invocation_t WHERE tool_id = %s", (tool.tool_id,)
        )
    ).fetchone()
    assert row is not None and row["n"] == cap
    refused(await _call_result(callers[0], tool), "WORKFLOW_CAPACITY_EXHAUSTED")


async def _call_result(caller: McpTestClient, tool: Tool) -> dict[str, Any]:
    return await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-last"}))
