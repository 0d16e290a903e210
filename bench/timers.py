"""Benchmark (not a test): runs parked on durable timers hold no slot; due-to-resume lag.

    .venv/bin/python -m bench.timers [--runs 1000] [--wait-s 60] [--spread-s 60] [--probes 20]
        [--standard-slots 2] [--fast]

Starts PostgreSQL (or uses $DATABASE_URL) and one in-process executor with the service's
default slots (2 standard unless --standard-slots). Admits --runs standard runs of `wait` then
a `set`, the i-th waiting --wait-s plus i/runs of --spread-s seconds (0: every run waits as
long, so they all fall due within the admission's few seconds: a burst that the standard
slots, not the timers, then bound): each parks on a durable timer and gives its slot back
(runtime.engine.run.timers).
While they are parked it runs --probes one-task standard runs one after another and times
each (admission -> result): with the waits holding slots, none could run. Then it waits for
every parked run to finish and reports the due-to-resume lag of each resumed task: its claim
time minus its available_at (the due time), by the database clock (the claim's sojourn_ms),
and the due-to-end lag (the run's finished_ts minus the due time).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from typing import Any

from bench.engine import database_url
from runtime.execution import ExecutionSettings, WorkflowRuntime, close_waiter, wait_for_result
from runtime.execution.settings import ServiceExecutionSettings
from runtime.scheduler import Executor
from runtime.scheduler.models import ClaimedTask
from runtime.security import Keyring
from runtime.store import Database, migrate
from tests.support.execution_runs import start_workflow_run

HEADER = {"dsl": "1.0.3", "namespace": "bench", "name": "timers", "version": "1.0.0"}
ADMITTERS = 8


def _waiting(wait_ms: int) -> dict[str, Any]:
    return {
        "document": HEADER,
        "do": [{"pause": {"wait": {"milliseconds": wait_ms}}}, {"after": {"set": {"done": True}}}],
    }


PROBE = {"document": HEADER, "do": [{"only": {"set": {"probe": True}}}]}


def _summary(samples_ms: list[float]) -> str:
    ordered = sorted(samples_ms)

    def q(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]

    return (
        f"p50 {q(0.5):8.1f} ms  p95 {q(0.95):8.1f} ms  p99 {q(0.99):8.1f} ms  "
        f"max {ordered[-1]:8.1f} ms  mean {statistics.fmean(ordered):8.1f} ms  (n={len(ordered)})"
    )


async def _start(db: Database, keyring: Keyring, host: str, doc: dict[str, Any]) -> str:
    return await start_workflow_run(
        db, host_id=host, user_id="bench", input={}, keyring=keyring, credential=None,
        definition=doc, execution_class="standard", timeout_ms=3_600_000,
    )  # fmt: skip


async def _count(db: Database, host: str, query: str) -> int:
    async with db.transaction(read_only=True) as conn:
        cursor = await conn.execute(query, {"host": host})
        row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


PARKED = (
    "SELECT count(*) AS n FROM workflow_task WHERE host_id = %(host)s AND state = 'ready'"
    " AND available_at > now()"
)
LIVE = (
    "SELECT count(*) AS n FROM workflow_process WHERE host_id = %(host)s"
    " AND state IN ('ACCEPTED', 'RUNNING', 'WAITING')"
)
DUE_TO_END = """
SELECT extract(epoch FROM p.finished_ts - t.available_at) * 1000 AS ms, p.state
FROM workflow_task t
JOIN workflow_process p ON p.host_id = t.host_id AND p.process_id = t.process_id
WHERE t.host_id = %(host)s AND t.payload ? 'timers'
"""


async def _admit(db: Database, keyring: Keyring, host: str, args: argparse.Namespace) -> None:
    runs = args.runs
    left = iter(range(runs))

    async def admitter() -> None:
        for i in left:
            wait_ms = round((args.wait_s + args.spread_s * i / runs) * 1000)
            await _start(db, keyring, host, _waiting(wait_ms))

    await asyncio.gather(*(admitter() for _ in range(ADMITTERS)))


async def _run(args: argparse.Namespace) -> None:
    with database_url(args.fast) as url:
        await migrate(url)
        async with Database(url, min_size=2, max_size=16) as db:
            await _measure(db, url, args)


async def _measure(db: Database, url: str, args: argparse.Namespace) -> None:
    keyring = Keyring.empty()
    runtime = WorkflowRuntime(ExecutionSettings(), keyring)
    settings = ServiceExecutionSettings(standard_slots=args.standard_slots).scheduler()
    lags: list[float] = []

    def on_claim(task: ClaimedTask) -> None:
        if "timers" in task.payload:
            lags.append(task.sojourn_ms)

    host = str(uuid.uuid4())
    executor = Executor(db, runtime.handlers(), settings, conninfo=url, on_claim=on_claim)
    async with executor:
        began = time.perf_counter()
        await _admit(db, keyring, host, args)
        admitted = time.perf_counter() - began
        print(f"admitted {args.runs} waiting runs in {admitted:.1f} s", flush=True)
        # Every run's first task goes through the standard slots once before it parks.
        while (parked := await _count(db, host, PARKED)) < args.runs:
            if time.perf_counter() - began > args.wait_s:
                break  # the first waits are due: report how many were parked at once
            await asyncio.sleep(0.2)
        took = time.perf_counter() - began
        print(
            f"parked at once: {parked} after {took:.1f} s (standard slots: "
            f"{settings.standard_slots})",
            flush=True,
        )
        probes = []
        for _ in range(args.probes):
            start = time.perf_counter()
            pid = await _start(db, keyring, host, PROBE)
            run = await wait_for_result(db, host, pid, timeout=60)
            assert run is not None and run.state == "COMPLETED", run
            probes.append((time.perf_counter() - start) * 1000)
        print(f"one-task run beside them   {_summary(probes)}", flush=True)
        while await _count(db, host, LIVE) > 0:
            await asyncio.sleep(0.5)
    await runtime.aclose()
    await close_waiter(db)
    async with db.transaction(read_only=True) as conn:
        cursor = await conn.execute(DUE_TO_END, {"host": host})
        rows = await cursor.fetchall()
    states = {row["state"] for row in rows}
    print(f"due -> resumed (claim)     {_summary(lags)}")
    print(f"due -> run ended           {_summary([float(row['ms']) for row in rows])}")
    print(f"run end states: {sorted(states)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when it completed (figures are reported, not judged)."""
    parser = argparse.ArgumentParser(prog="bench.timers", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--wait-s", type=int, default=60)
    parser.add_argument("--spread-s", type=float, default=60.0)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--standard-slots", type=int, default=2)
    parser.add_argument("--fast", action="store_true", help="PostgreSQL without fsync")
    args = parser.parse_args(argv)
    asyncio.run(_run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
