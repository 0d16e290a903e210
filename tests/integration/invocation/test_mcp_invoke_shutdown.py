"""A draining server ends its result waits at once: each in-flight invoke answers WORKFLOW_TIMEOUT.

On SIGTERM `serve` calls stop_waiting before uvicorn waits for in-flight requests (the real
process is tested in tests/e2e/test_every_request_answered.py); here the same call in process.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from runtime.execution import stop_waiting
from runtime.store import Database
from tests.support.invocation import invoke_args, publish_tool, refused
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

# Well before the Tool's syncWaitMs (20 s), which would end the waits by itself.
ANSWERED_WITHIN_S = 10.0


async def _runs(admin: psycopg.AsyncConnection[Any]) -> int:
    cursor = await admin.execute("SELECT count(*) AS n FROM workflow_process")
    row = await cursor.fetchone()
    return int(row["n"]) if row else 0


async def test_stop_waiting_answers_in_flight_and_later_invokes_with_a_retryable_timeout(
    db: Database,
    owner: McpTestClient,
    caller: McpTestClient,
    admin: psycopg.AsyncConnection[Any],
) -> None:
    tool = await publish_tool(owner)  # no executor runs: the run stays ACCEPTED
    waiting = asyncio.create_task(caller.call_tool("workflow_invoke", invoke_args(tool)))

    async def admitted() -> bool:
        return await _runs(admin) == 1

    await wait_until(admitted, what="the invoke's run admitted")
    stop_waiting(db)
    async with asyncio.timeout(ANSWERED_WITHIN_S):
        first = refused(await waiting, "WORKFLOW_TIMEOUT")
        later = refused(
            await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-2"})),
            "WORKFLOW_TIMEOUT",
        )
    for body in (first, later):
        assert body["error"]["retryable"] is True
        assert body["status"] == "timeout"
    assert first["workflowInstanceId"] != later["workflowInstanceId"]
    # The runs are durable: a drain answers the callers, it does not end the runs.
    assert await _runs(admin) == 2
