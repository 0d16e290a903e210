"""Benchmark (not a test): durable MCP tasks with many open at once (issue 35 item 4).

    .venv/bin/python -m bench.mcp_tasks [--open 10000] [--gets 1000] [--updates 100] [--fast]

Starts PostgreSQL and the real service (bench/harness.py), saves one start-run definition (an
approval `ask` the starter may answer, then a `set`), and opens --open tasks: workflow_start
tools/calls declaring the tasks extension (2026-07-28), 32 in flight, until every run is
WAITING on its ask. Then, with all of them open:

- tasks/get: --gets calls, one at a time, each on a random open task (input_required: the run's
  status, the caller's open asks and the task row are read each time);
- workflow_get_status of the same runs, as a baseline: one tool call, one read;
- tasks/update -> resumed: for --updates tasks, one at a time, the time from sending
  tasks/update (the answer) to the run's end, read with workflow_wait_result sent right after
  the update's acknowledgement (the waiter returns as soon as the run ends; its next task is a
  `set`).

Prints p50/p95/p99/max of both, and the server's thread count with no task and with all open
(the tasks cost rows, not threads or pollers). Issue 35's targets: tasks/get p99 under 10 ms
and tasks/update -> resumed p99 under 100 ms, with 10,000 open tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.harness import MODERN, Gateway, Service, database, gateway_for, new_id, running_service
from bench.human_tasks import _save
from bench.workload import CALLER_ROLES, OWNER

EXTENSION = "io.modelcontextprotocol/tasks"
IN_FLIGHT = 32


async def _task_call(who: Gateway, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 request declaring the tasks extension; its result (raises on an error)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        **who.auth,
    }
    named = params.get("taskId", params.get("name"))
    if isinstance(named, str):
        headers["Mcp-Name"] = named
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXTENSION: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    response = await who.http.post(who.url, content=json.dumps(message), headers=headers)
    body = response.json()
    if "result" not in body:
        raise RuntimeError(f"{method} failed: {body}")
    result: dict[str, Any] = body["result"]
    return result


async def _open_tasks(starter: Gateway, wf_def_id: str, count: int) -> list[str]:
    ids: list[str] = []
    pending = iter(range(count))

    async def worker() -> None:
        for _ in pending:
            arguments = {"wfDefId": wf_def_id, "input": {}}
            created = await _task_call(
                starter, "tools/call", {"name": "workflow_start", "arguments": arguments}
            )
            if created.get("resultType") != "task":
                raise RuntimeError(f"no task: {created}")
            ids.append(str(created["taskId"]))

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return ids


def _waiting_runs(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM workflow_process WHERE state = 'WAITING'"
        ).fetchone()
        return int(row[0]) if row else 0


async def _all_waiting(database_url: str, count: int) -> None:
    deadline = time.monotonic() + 1800
    while (waiting := await asyncio.to_thread(_waiting_runs, database_url)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {waiting} of {count} runs reached their ask")
        await asyncio.sleep(1.0)


def _threads(service: Service) -> int:
    status = Path(f"/proc/{service.server.pid}/status").read_text(encoding="utf-8")
    line = next(line for line in status.splitlines() if line.startswith("Threads:"))
    return int(line.split()[1])


async def _gets(starter: Gateway, ids: list[str], count: int) -> list[float]:
    samples = []
    for task_id in random.sample(ids, min(count, len(ids))):
        began = time.perf_counter()
        got = await _task_call(starter, "tasks/get", {"taskId": task_id})
        samples.append((time.perf_counter() - began) * 1000)
        if got["status"] != "input_required":
            raise RuntimeError(f"task {task_id} is {got['status']}, not input_required")
    return sorted(samples)


def _run_of(database_url: str, task_id: str) -> str:
    """The run a task follows (read from its row: the task protocol does not name it)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT process_id::text FROM workflow_mcp_task WHERE task_id = %s", (task_id,)
        ).fetchone()
    if row is None:
        raise RuntimeError(f"no row for task {task_id}")
    return str(row[0])


async def _updates(starter: Gateway, database_url: str, ids: list[str], count: int) -> list[float]:
    samples = []
    for task_id in ids[:count]:
        asked = await _task_call(starter, "tasks/get", {"taskId": task_id})
        [key] = asked["inputRequests"]
        instance = await asyncio.to_thread(_run_of, database_url, task_id)
        responses = {key: {"action": "accept", "content": {"value": "APPROVED"}}}
        began = time.perf_counter()
        await _task_call(starter, "tasks/update", {"taskId": task_id, "inputResponses": responses})
        ended = await starter.call("workflow_wait_result", {"workflowInstanceId": instance})
        samples.append((time.perf_counter() - began) * 1000)
        state = ended.body["result"]["structuredContent"].get("state")
        if state != "COMPLETED":
            raise RuntimeError(f"the run did not complete: {state}")
    return sorted(samples)


def _runs_of(database_url: str) -> dict[str, str]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute("SELECT task_id, process_id::text FROM workflow_mcp_task").fetchall()
    return {str(task): str(run) for task, run in rows}


async def _status_baseline(
    starter: Gateway, database_url: str, ids: list[str], count: int
) -> list[float]:
    """workflow_get_status of the same runs: the one-tool read a task read is built from."""
    runs = await asyncio.to_thread(_runs_of, database_url)
    samples = []
    for task_id in random.sample(ids, min(count, len(ids))):
        began = time.perf_counter()
        await starter.call("workflow_get_status", {"workflowInstanceId": runs[task_id]})
        samples.append((time.perf_counter() - began) * 1000)
    return sorted(samples)


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _report(what: str, samples: list[float]) -> None:
    print(
        f"{what}, {len(samples)} calls: p50 {_quantile(samples, 0.5):.1f} ms, "
        f"p95 {_quantile(samples, 0.95):.1f} ms, p99 {_quantile(samples, 0.99):.1f} ms, "
        f"max {samples[-1]:.1f} ms",
        flush=True,
    )


async def _main(open_count: int, gets: int, updates: int, fast: bool) -> None:
    with database(fast=fast) as (url, postmaster), running_service(url, postmaster, {}) as service:
        host_id = new_id()
        async with httpx.AsyncClient(timeout=60.0, limits=httpx.Limits(max_connections=64)) as http:
            owner = gateway_for(service, http, host_id, OWNER, CALLER_ROLES)
            roles = (*CALLER_ROLES, "approver")
            starter = gateway_for(service, http, host_id, "bench-starter", roles)
            wf_def_id = new_id()
            await _save(owner, host_id, wf_def_id)
            idle_threads = _threads(service)
            began = time.monotonic()
            ids = await _open_tasks(starter, wf_def_id, open_count)
            await _all_waiting(service.database_url, open_count)
            print(
                f"{open_count} tasks open (every run WAITING on its ask) in "
                f"{time.monotonic() - began:.0f} s; server threads {idle_threads} before, "
                f"{_threads(service)} with them open",
                flush=True,
            )
            await _gets(starter, ids, 20)  # warm-up
            _report(f"tasks/get with {open_count} open", await _gets(starter, ids, gets))
            _report(
                f"workflow_get_status of the same runs (baseline), with {open_count} open",
                await _status_baseline(starter, service.database_url, ids, gets),
            )
            _report(
                f"tasks/update -> run resumed and ended, with {open_count} open",
                await _updates(starter, service.database_url, ids, updates),
            )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when it completed (figures are reported, not judged)."""
    parser = argparse.ArgumentParser(prog="bench.mcp_tasks", description=__doc__.split("\n")[0])
    parser.add_argument("--open", type=int, default=10_000)
    parser.add_argument("--gets", type=int, default=1_000)
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--fast", action="store_true", help="PostgreSQL without fsync")
    args = parser.parse_args(argv)
    asyncio.run(_main(args.open, args.gets, args.updates, args.fast))
    return 0


if __name__ == "__main__":
    sys.exit(main())
