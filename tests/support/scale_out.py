"""Load for the scale-out test: many invokes through several API processes, retried as a
Gateway retries, and what the shared database says about the runs afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.support.invocation import Tool, invoke_args
from tests.support.mcp import McpTestClient
from tests.support.processes import worker_command

UNLIMITED = 1_000_000_000
ROOMY_LIMITS = {
    "maximumConcurrentRuns": UNLIMITED,
    "maximumConcurrentRunsPerUser": UNLIMITED,
    "startsPerMinute": UNLIMITED,
    "startsPerMinutePerUser": UNLIMITED,
}
# Leases long enough for a CPU-starved 2-core box, short enough to recover a kill quickly.
WORKER_TIMING = (
    "--lease-ms", "2000", "--renew-interval-ms", "500", "--reap-interval-ms", "300",
    "--poll-interval-ms", "500",
)  # fmt: skip
RETRIED = {"WORKFLOW_TIMEOUT", "WORKFLOW_CAPACITY_EXHAUSTED", "WORKFLOW_INVOCATION_UNAVAILABLE"}


@dataclass
class Load:
    """What the invokes saw: each call's run id, and how many have finished."""

    instance_ids: dict[int, str] = field(default_factory=dict)
    refusals: list[dict[str, Any]] = field(default_factory=list)
    finished: int = 0


async def invoke_until_done(caller: McpTestClient, tool: Tool, index: int, load: Load) -> None:
    """One invoke, repeated on a retryable answer (a timeout re-attaches to the same run)."""
    args = invoke_args(tool, {"claimId": f"C-{index}"})
    while True:
        result = await caller.call_tool("workflow_invoke", args)
        body = result["structuredContent"]
        if not result["isError"]:
            load.instance_ids[index] = body["workflowInstanceId"]
            break
        error = body["error"]
        if error["code"] not in RETRIED:
            load.refusals.append(body)
            break
        # The Gateway's backoff: the service says when capacity is expected back.
        await asyncio.sleep(error.get("retryAfterMs", 50) / 1000)
    load.finished += 1


async def invoke_all(
    callers: list[McpTestClient], tool: Tool, count: int, concurrency: int, load: Load
) -> None:
    """count invokes with distinct inputs, round-robin over the callers' API processes."""
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int) -> None:
        async with gate:
            await invoke_until_done(callers[index % len(callers)], tool, index, load)

    await asyncio.gather(*(one(index) for index in range(count)))


@asynccontextmanager
async def worker(
    database_url: str,
    config: Path,
    name: str,
    slots: int,
    faults: str = "",
    *,
    debug_log: Path | None = None,
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A `workflow-mcp worker` process on the shared database, yielded once it claims.

    debug_log: write its JSON log lines at DEBUG (claim rounds included) to this file.
    """
    args = [
        "--config", str(config), "--database-url", database_url, "--worker-id", name,
        "--slots", str(slots), *WORKER_TIMING,
    ]  # fmt: skip
    env = dict(os.environ, WORKFLOW_FAULTS=faults, PYTHONUNBUFFERED="1")
    if debug_log is not None:
        env.update(WORKFLOW_TELEMETRY_LOG_LEVEL="DEBUG", WORKFLOW_TELEMETRY_LOG_FORMAT="json")
    async with worker_command(args, env, ready_timeout_s=90, log_path=debug_log) as proc:
        yield proc


def claim_rounds(debug_log: Path) -> list[int]:
    """The claim round of every claim a worker logged, in order (its log at DEBUG)."""
    rounds = []
    for line in debug_log.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "claim_round" in record:
            rounds.append(int(record["claim_round"]))
    return rounds


async def killed(proc: asyncio.subprocess.Process) -> bool:
    """Whether the process ended by SIGKILL (waits for it to end)."""
    return await proc.wait() == -signal.SIGKILL


async def scalar(database_url: str, sql: str, *params: Any) -> Any:
    """One value read as the schema owner."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(sql, params)  # type: ignore[arg-type]
        row = await cursor.fetchone()
        return None if row is None else row[0]
