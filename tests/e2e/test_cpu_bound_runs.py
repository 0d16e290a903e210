"""A CPU-heavy run in real service processes: its step budget ends it, /healthz keeps answering.

Three nested loops over 60 items once held the serving loop for seconds: the 1 s lease lapsed
and the task was claimed again and again (issue 9). Now interpretation runs off the serving
loop and each task attempt has a deterministic step budget, so the run ends
WORKFLOW_BUDGET_EXHAUSTED on its first attempt, with one process and with two processes
sharing the database, while every /healthz probe is answered.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import OWNER
from tests.support.invocation import (
    client,
    invoke_args,
    publish_tool,
    refused,
    until_settled,
)
from tests.support.processes import serving_processes
from tests.support.server import LiveServer

pytestmark = pytest.mark.timeout(600)

NESTED_LOOPS = """\
document:
  dsl: "1.0.3"
  namespace: claims
  name: summarize-claim
  version: "1.2.0"
input:
  schema:
    format: json
    document:
      type: object
do:
  - outer:
      for:
        each: a
        in: "${ input.items }"
      do:
        - middle:
            for:
              each: b
              in: "${ input.items }"
            do:
              - inner:
                  for:
                    each: c
                    in: "${ input.items }"
                  do:
                    - add:
                        set:
                          items: "${ input.items }"
                          total: "${ a * b + c }"
"""
# Cost units far above the step-budget setting: the setting's default bounds the task.
ROOMY_BOUNDS = {
    "maximumTaskAttempts": 8,
    "maximumNestedCalls": 4,
    "maximumParallelism": 4,
    "maximumRequestBytes": 65536,
    "maximumIntermediateBytes": 1048576,
    "maximumResultBytes": 65536,
    "maximumCostUnits": 1_000_000_000,
}


@dataclass
class HealthProbes:
    """What the /healthz poller saw while the run computed."""

    latencies_ms: list[float] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)


async def probe_health(servers: list[LiveServer], stop: asyncio.Event, seen: HealthProbes) -> None:
    """Poll every process's /healthz until stop; record each latency or why it went unanswered."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        while not stop.is_set():
            for server in servers:
                started = time.perf_counter()
                try:
                    response = await http.get(f"{server.base_url}/healthz")
                except httpx.HTTPError as exc:
                    seen.unanswered.append(f"{server.base_url}: {type(exc).__name__}")
                    continue
                if response.status_code != 200:
                    seen.unanswered.append(f"{server.base_url}: HTTP {response.status_code}")
                seen.latencies_ms.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.05)


async def claims_of(database_url: str, process_id: str) -> list[int]:
    """The attempts of every task of a run (one row per task, attempts = its claims)."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT attempts FROM workflow_task WHERE process_id = %s ORDER BY step_no",
            (process_id,),
        )
        return [row[0] for row in await cursor.fetchall()]


async def run_nested_loops(
    servers: list[LiveServer], identity: DevIdentity
) -> tuple[dict[str, Any], HealthProbes, HealthProbes]:
    """Publish the nested-loop Tool, invoke it through the first process, poll /healthz."""
    async with httpx.AsyncClient(base_url=servers[0].base_url, timeout=120.0) as http:
        owner = client(http, identity, OWNER)
        caller = client(http, identity)
        tool = await publish_tool(owner, text=NESTED_LOOPS, runtimeBounds=ROOMY_BOUNDS)
        idle = await idle_health(servers)
        stop, seen = asyncio.Event(), HealthProbes()
        poller = asyncio.create_task(probe_health(servers, stop, seen))
        try:
            args = invoke_args(tool, {"items": list(range(60))})
            result = await until_settled(
                lambda: caller.call_tool("workflow_invoke", args), within_s=300
            )
        finally:
            stop.set()
            await poller
    return refused(result, "WORKFLOW_BUDGET_EXHAUSTED"), seen, idle


async def idle_health(servers: list[LiveServer]) -> HealthProbes:
    """The same probes for a moment with nothing running: the machine's own baseline."""
    stop, seen = asyncio.Event(), HealthProbes()
    poller = asyncio.create_task(probe_health(servers, stop, seen))
    # A fixed sampling window is the measurement itself: the baseline of a quiet machine.
    await asyncio.sleep(3)
    stop.set()
    await poller
    return seen


@pytest.mark.parametrize("processes", [1, 2])
async def test_nested_loops_end_budget_exhausted_on_the_first_attempt_while_healthz_answers(
    processes: int, database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    with serving_processes(database_url, tmp_path, live_identity, processes) as servers:
        body, seen, idle = await run_nested_loops(servers, live_identity)
    assert body["status"] == "failed"
    assert await claims_of(database_url, body["workflowInstanceId"]) == [1]
    assert seen.latencies_ms and not seen.unanswered, seen.unanswered
    # Reported, not asserted (no timed assertions in tests): the target is 100 ms.
    print(f"\n/healthz, {processes} process(es), while computing: {summary(seen)}")
    print(f"/healthz, {processes} process(es), idle: {summary(idle)}")


def summary(seen: HealthProbes) -> str:
    """Probe count, p50, p99 and max latency."""
    ordered = sorted(seen.latencies_ms)
    p50, p99 = ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]
    return f"{len(ordered)} probes, p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {ordered[-1]:.1f} ms"
