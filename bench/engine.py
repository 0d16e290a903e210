"""Benchmark (not a test): wake-up, scheduler and WORKFLOW end-to-end, crash recovery.

    .venv/bin/python -m bench.engine [--samples 300] [--crash-samples 10] [--fast]
                                     [--only workflow-1,workflow-8,...] [--warmup 20]

Uses $DATABASE_URL (a database it may migrate and fill) or an embedded cluster in a temp
dir. Every figure is printed beside the PostgreSQL commit round trip measured in the same
run. Targets: insert-to-claim p99 < 5 ms; crash recovery p99 < 2 s with default leases.
Each line also gives the mean and this process's CPU time per operation inside the sample
loop (client, executor and engine threads together; the scenario's set-up and PostgreSQL's
own CPU are not in it): less sensitive than latency to other load on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.scheduler import Executor, service
from runtime.scheduler.models import ClaimedTask, NewTask, SchedulerSettings
from runtime.security import Keyring
from runtime.store import Database, EmbeddedPostgres, migrate
from tests.support.demo import HANDLERS
from tests.support.execution_runs import start_workflow_run

REPO = Path(__file__).resolve().parent.parent


def percentiles(samples_s: list[float]) -> str:
    """p50 / p99 / max in milliseconds."""
    ordered = sorted(samples_s)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"p50 {statistics.median(ordered) * 1000:8.2f} ms  p99 {p99 * 1000:8.2f} ms"
        f"  max {ordered[-1] * 1000:8.2f} ms  (n={len(ordered)})"
    )


def costs(samples_s: list[float], cpu_s: float) -> str:
    """Mean latency and process CPU time per operation, in milliseconds."""
    return (
        f"  mean {statistics.fmean(samples_s) * 1000:8.2f} ms"
        f"  cpu {cpu_s / len(samples_s) * 1000:6.2f} ms/op"
    )


@contextmanager
def database_url(fast: bool) -> Iterator[str]:
    """$DATABASE_URL, or a fresh embedded cluster in a temp dir for the duration."""
    external = os.environ.get("DATABASE_URL")
    if external:
        yield external
        return
    base = Path(tempfile.mkdtemp(prefix="wf-bench-"))
    base.chmod(0o755)
    cluster = EmbeddedPostgres(base / "pg", database="bench", fast=fast)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


# Process CPU time inside each measurement's sample loop (its set-up and tear-down, such as a
# new WorkflowRuntime's HTTP clients and TLS contexts, left out), appended per measurement.
LOOP_CPU: list[float] = []


def loop_cpu_since(began: float) -> None:
    """Record the CPU time of a sample loop that started at process_time() == began."""
    LOOP_CPU.append(time.process_time() - began)


async def commit_round_trips(db: Database, samples: int) -> list[float]:
    """One write transaction (an xid is assigned, so COMMIT really commits) per sample."""
    timings = []
    cpu_began = time.process_time()
    for _ in range(samples):
        began = time.perf_counter()
        async with db.transaction() as conn:
            await conn.execute("SELECT txid_current()")
        timings.append(time.perf_counter() - began)
    loop_cpu_since(cpu_began)
    return timings


class Completions:
    """Waits for a run's terminal NOTIFY on one dedicated LISTEN connection."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._waiters: dict[str, asyncio.Future[float]] = {}
        # Notifications that arrived before expect() (a run whose id is known only on return).
        self._early: dict[str, float] = {}
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._pump: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Completions:
        self._conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        # Run ends are notified on workflow_process_state_<last hex digit of the run id>; the
        # single channel of older code is heard too, so A/B runs against a baseline still work.
        for suffix in ("", *(f"_{slot:x}" for slot in range(16))):
            await self._conn.execute(f"LISTEN workflow_process_state{suffix}")
        self._pump = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pump is not None:
            self._pump.cancel()
        if self._conn is not None:
            await self._conn.close()

    def expect(self, process_id: str) -> asyncio.Future[float]:
        """A future resolved with perf_counter() when process_id's NOTIFY arrives."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        if process_id in self._early:
            future.set_result(self._early.pop(process_id))
            return future
        self._waiters[process_id] = future
        return future

    async def _run(self) -> None:
        assert self._conn is not None
        async for notify in self._conn.notifies():
            process_id = json.loads(notify.payload)["id"]
            future = self._waiters.pop(process_id, None)
            if future is None:
                self._early[process_id] = time.perf_counter()
            elif not future.done():
                future.set_result(time.perf_counter())


async def start_run(db: Database, kind: str, payload: dict[str, Any], pid: str) -> None:
    async with db.transaction() as conn:
        await service.enqueue_process(
            conn, host_id=str(uuid.uuid4()), process_id=pid, first_task=NewTask(kind, payload)
        )


async def insert_to_claim(db: Database, url: str, samples: int) -> list[float]:
    """Idle executor: commit of a run's insert -> the claim of its task."""
    claimed: dict[str, float] = {}
    observer: Callable[[ClaimedTask], None] = lambda task: claimed.setdefault(  # noqa: E731
        task.process_id, time.perf_counter()
    )
    timings = []
    async with Completions(url) as done, Executor(db, HANDLERS, conninfo=url, on_claim=observer):
        cpu_began = time.process_time()
        for _ in range(samples):
            pid = str(uuid.uuid4())
            finished = done.expect(pid)
            await start_run(db, "echo", {}, pid)
            committed = time.perf_counter()
            async with asyncio.timeout(10):
                await finished
            timings.append(claimed[pid] - committed)
        loop_cpu_since(cpu_began)
    return timings


async def end_to_end(db: Database, url: str, samples: int, tasks: int) -> list[float]:
    """Start of a run's insert -> its COMPLETED notification, tasks sequential steps."""
    timings = []
    async with Completions(url) as done, Executor(db, HANDLERS, conninfo=url):
        cpu_began = time.process_time()
        for _ in range(samples):
            pid = str(uuid.uuid4())
            finished = done.expect(pid)
            began = time.perf_counter()
            await start_run(db, "chain", {"remaining": tasks - 1}, pid)
            async with asyncio.timeout(10):
                timings.append(await finished - began)
        loop_cpu_since(cpu_began)
    return timings


def set_workflow(tasks: int) -> dict[str, Any]:
    """A definition of `tasks` sequential set tasks."""
    header = {"dsl": "1.0.3", "namespace": "bench", "name": "sets", "version": "1.0.0"}
    return {"document": header, "do": [{f"s{i}": {"set": {"i": i}}} for i in range(tasks)]}


async def workflow_end_to_end(db: Database, url: str, samples: int, tasks: int) -> list[float]:
    """Through runtime.execution (admit_run): the run's start -> its COMPLETED notification."""
    keyring = Keyring.empty()
    runtime = WorkflowRuntime(ExecutionSettings(), keyring)
    definition = set_workflow(tasks)
    timings = []
    async with Completions(url) as done, Executor(db, runtime.handlers(), conninfo=url):
        cpu_began = time.process_time()
        for _ in range(samples):
            began = time.perf_counter()
            pid = await start_workflow_run(
                db, host_id=str(uuid.uuid4()), user_id="bench", input={}, keyring=keyring,
                credential=None, definition=definition,
            )  # fmt: skip
            # The NOTIFY cannot arrive before the id is known: expect it right away.
            finished = done.expect(pid)
            async with asyncio.timeout(10):
                timings.append(await finished - began)
        loop_cpu_since(cpu_began)
    await runtime.aclose()
    return timings


async def crash_recovery(db: Database, url: str, samples: int) -> list[float]:
    """A worker process SIGKILLs itself right after claiming; time to completion elsewhere."""
    timings = []
    env = dict(os.environ, WORKFLOW_FAULTS="after_claim=kill")
    async with Completions(url) as done:
        cpu_began = time.process_time()
        for _ in range(samples):
            doomed = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "runtime.cli", "worker", "--database-url", url,
                "--handlers", "tests.support.demo:HANDLERS",
                cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert doomed.stdout is not None
            await doomed.stdout.readline()
            pid = str(uuid.uuid4())
            finished = done.expect(pid)
            await start_run(db, "echo", {}, pid)
            assert await doomed.wait() == -signal.SIGKILL
            killed = time.perf_counter()
            # The rescuer starts now: it cannot claim before the dead lease expires anyway.
            async with Executor(db, HANDLERS, conninfo=url):
                async with asyncio.timeout(30):
                    timings.append(await finished - killed)
        loop_cpu_since(cpu_began)
    return timings


async def run(args: argparse.Namespace) -> None:
    with database_url(args.fast) as url:
        await migrate(url)
        async with Database(url, min_size=2, max_size=12) as db:
            settings = SchedulerSettings()
            n = args.samples
            rtt = await commit_round_trips(db, args.samples)
            print(f"lease {settings.lease_ms} ms, poll {settings.poll_interval_ms} ms")
            # (key, label, measurement taking a sample count, sample count)
            report: list[tuple[str, str, Callable[[int], Awaitable[list[float]]], int]] = [
                ("claim", "insert-to-claim (idle)", partial(insert_to_claim, db, url), n),
                ("run-1", "one-task run end-to-end", partial(end_to_end, db, url, tasks=1), n),
                (
                    "run-8",
                    "eight-task run end-to-end",
                    partial(end_to_end, db, url, tasks=8),
                    n // 4,
                ),
                (
                    "workflow-1",
                    "1-task WORKFLOW end-to-end",
                    partial(workflow_end_to_end, db, url, tasks=1),
                    n // 2,
                ),
                (
                    "workflow-8",
                    "8-task WORKFLOW end-to-end",
                    partial(workflow_end_to_end, db, url, tasks=8),
                    n // 4,
                ),
                (
                    "crash",
                    "crash recovery (SIGKILL)",
                    partial(crash_recovery, db, url),
                    args.crash_samples,
                ),
            ]
            print(f"{'commit round trip':28s} {percentiles(rtt)}")
            for key, name, measure, samples in report:
                if args.only and key not in args.only:
                    continue
                if args.warmup and key != "crash":
                    await measure(args.warmup)  # one-time costs (lazy imports, pools) left out
                LOOP_CPU.clear()
                timings = await measure(samples)
                print(
                    f"{name:28s} {percentiles(timings)}{costs(timings, sum(LOOP_CPU))}", flush=True
                )
            again = await commit_round_trips(db, args.samples)
            print(f"{'commit round trip (again)':28s} {percentiles(again)}")


def main() -> None:
    """CLI entry point."""
    parser = argparse.ArgumentParser(prog="python -m bench.engine")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--crash-samples", type=int, default=10)
    parser.add_argument("--fast", action="store_true", help="embedded cluster without fsync")
    parser.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="unmeasured runs before each scenario (0: the first runs carry one-time costs)",
    )
    parser.add_argument(
        "--only",
        type=lambda text: set(text.split(",")),
        default=None,
        help="comma-separated subset of claim,run-1,run-8,workflow-1,workflow-8,crash",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
