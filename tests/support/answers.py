"""Helpers for "every request gets an answer": calls that record how they ended, raw keep-alive.

A call ends either with an HTTP response (its status and, for a tool result, the error code)
or without one (the transport error's type: ReadError, RemoteProtocolError, ...). The tests
assert there is never the second kind, under load and across a SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg

from tests.support.invocation import Tool, invoke_args
from tests.support.mcp import McpTestClient

# A wait as long as the deadline allows (30 s): the run is still going when syncWaitMs ends.
LONG_WAIT_TASK = "  - pause:\n      wait: PT25S\n"


@dataclass
class Ended:
    """How one call ended, and when (time.monotonic())."""

    outcome: str
    at: float
    body: dict[str, Any] | None = None
    retry_after_ms: int | None = None

    @property
    def answered(self) -> bool:
        """An HTTP response came back (any status)."""
        return not self.outcome.startswith("NO_ANSWER:")


def outcome_of(status: int, body: Any) -> tuple[str, int | None]:
    """OK, a tool error code, RPC_<code> or HTTP_<status>; and any retryAfterMs."""
    if status != 200 or not isinstance(body, dict):
        return f"HTTP_{status}", None
    if "error" in body:
        return f"RPC_{body['error'].get('code')}", None
    result = body.get("result") or {}
    if not result.get("isError"):
        return "OK", None
    error = (result.get("structuredContent") or {}).get("error") or {}
    return str(error.get("code")), error.get("retryAfterMs")


async def invoke_once(client: McpTestClient, tool: Tool, n: int) -> Ended:
    """One workflow_invoke with a fresh input; how it ended (never raises a transport error)."""
    message = {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": client.params_with_meta(
            {"name": "workflow_invoke", "arguments": invoke_args(tool, {"claimId": f"C-{n}"})}
        ),
    }
    headers = {**client.envelope_headers("tools/call", "workflow_invoke"), **client.auth}
    try:
        response = await client.http.post("/mcp", json=message, headers=headers)
    except httpx.TransportError as exc:
        return Ended(f"NO_ANSWER:{type(exc).__name__}", time.monotonic())
    body = response.json() if response.content else None
    outcome, retry_after_ms = outcome_of(response.status_code, body)
    return Ended(outcome, time.monotonic(), body, retry_after_ms)


async def closed_loop(call: Callable[[int], Any], callers: int, seconds: float) -> Counter[str]:
    """callers loops calling again as each call ends (after a capped retryAfterMs), for seconds."""
    stop_at = time.monotonic() + seconds
    outcomes: Counter[str] = Counter()
    numbers = iter(range(10**9))

    async def loop() -> None:
        while time.monotonic() < stop_at:
            ended: Ended = await call(next(numbers))
            outcomes[ended.outcome] += 1
            if ended.retry_after_ms:
                # At most 2 s: each caller then calls several times in the test's few seconds.
                pause = min(ended.retry_after_ms / 1000, 2.0, stop_at - time.monotonic())
                await asyncio.sleep(max(0.0, pause))

    await asyncio.gather(*(loop() for _ in range(callers)))
    return outcomes


async def runs_in_state(database_url: str, states: tuple[str, ...]) -> int:
    """How many runs of the database are in one of states."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM workflow_process WHERE state = ANY(%s)", (list(states),)
        )
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def tasks_running(database_url: str) -> int:
    """How many tasks of the database an executor holds right now."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute("SELECT count(*) FROM workflow_task WHERE state = 'running'")
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def keep_alive_survives(host: str, port: int, idle_s: float) -> bool:
    """Whether one connection answers GET /healthz, idles idle_s, then answers again."""
    reader, writer = await asyncio.open_connection(host, port)
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    try:
        for round_ in (1, 2):
            writer.write(request)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            if round_ == 1:
                await asyncio.sleep(idle_s)
        return True
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
