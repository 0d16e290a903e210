"""Benchmark (not a test): workflow_invoke through POST /mcp exactly as the Gateway calls it.

    .venv/bin/python -m bench.invoke [--quick] [--only sequential,closed,open,start,floors]
                                     [--out results.json] [--fast] [--seconds 10]

Starts PostgreSQL (embedded in a temp dir, or $DATABASE_URL), a local HTTP backend and the real
service (`runtime.cli serve`, litestar under uvicorn) in child processes; publishes Tools on
8 hosts through POST /mcp; then drives it with user + X-Scope-Token bearers over httpx:

- sequential: one-task and eight-task invokes, set-only and with one HTTP call;
- closed: 10, 50 and 200 callers across the 8 hosts while a 9th host keeps a batch backlog;
- open: 50, 100, 150 and 300 calls/s (Poisson arrivals; each call bounded by a timeout);
- start: workflow_start acceptance at 50 concurrent callers;
- floors: a three-commit psycopg sequence and tools/list through the endpoint.

For every scenario it prints p50/p95/p99 (all calls, admitted calls, refused calls), calls/s,
outcomes by code, commits per call (pg_stat_database.xact_commit and write transactions by
xid, both deltas minus the idle rate) and service / PostgreSQL CPU per call, and writes JSON.
Loopback only; every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from bench.harness import Reply, Service, database, running_service, xact_commits
from bench.workload import KINDS, BatchBacklog, Tenants, publish_tenants

SCENARIOS = ("sequential", "closed", "open", "start", "floors")
HOSTS = 8
CONNECTIONS_PER_HOST = 64
# syncWaitMs of the bench Tools is 20 s: a call still open after this is the service's backlog.
CALL_TIMEOUT_S = 25.0
DRAIN_LIMIT_S = CALL_TIMEOUT_S + 5
OPEN_LOOP_MAX_S = 6.0


@dataclass
class Profile:
    """Sizes of one run: full or --quick."""

    sequential_calls: int
    seconds: float
    closed_callers: tuple[int, ...]
    open_rates: tuple[int, ...]
    start_callers: int
    floor_samples: int
    backlog_depth: int


FULL = Profile(300, 10.0, (10, 50, 200), (50, 100, 150, 300), 50, 300, 40)
QUICK = Profile(20, 2.0, (10, 50), (50, 150), 10, 30, 10)


@dataclass
class Sample:
    """One call: when it began (s since the scenario start), how long it took, how it ended."""

    began: float
    latency: float
    outcome: str
    retry_after_ms: int | None = None


@dataclass
class Meter:
    """Counters read before and after a scenario."""

    commits: int
    xid: int
    server_cpu: float
    postgres_cpu: float
    client_cpu: float
    at: float


def _xid(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
    assert row is not None
    return int(row[0])


async def read_meter(service: Service) -> Meter:
    """Commit and xid counters and CPU times now (stats flushed first)."""
    # Backends flush their commit counts to pg_stat at most once a second once idle.
    await asyncio.sleep(1.1)
    commits = await asyncio.to_thread(xact_commits, service.database_url)
    xid = await asyncio.to_thread(_xid, service.database_url)
    return Meter(
        commits,
        xid,
        service.server_cpu(),
        service.postgres_cpu(),
        time.process_time(),
        time.monotonic(),
    )


def quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted samples (nearest rank), in ms."""
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def latency_summary(latencies: list[float]) -> dict[str, float]:
    """p50/p95/p99/max in ms."""
    ordered = sorted(latencies)
    return {
        "n": len(ordered),
        "p50": quantile(ordered, 0.5),
        "p95": quantile(ordered, 0.95),
        "p99": quantile(ordered, 0.99),
        "max": ordered[-1] * 1000 if ordered else float("nan"),
    }


@dataclass
class Result:
    """What one scenario measured."""

    name: str
    samples: list[Sample]
    elapsed: float
    before: Meter
    after: Meter
    idle_commit_rate: float
    idle_xid_rate: float
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The scenario's figures as JSON-able values."""
        calls = max(1, len(self.samples))
        window = self.after.at - self.before.at
        commits = self.after.commits - self.before.commits - self.idle_commit_rate * window
        xids = self.after.xid - self.before.xid - self.idle_xid_rate * window
        admitted = [s.latency for s in self.samples if s.outcome == "OK"]
        refused = [s for s in self.samples if s.outcome == "WORKFLOW_CAPACITY_EXHAUSTED"]
        retry_after = [s.retry_after_ms for s in refused if s.retry_after_ms is not None]
        return {
            "scenario": self.name,
            "calls": len(self.samples),
            "elapsedS": round(self.elapsed, 3),
            "okPerS": round(len(admitted) / self.elapsed, 1) if self.elapsed else None,
            "all": latency_summary([s.latency for s in self.samples]),
            "ok": latency_summary(admitted),
            "refused": latency_summary([s.latency for s in refused]),
            "retryAfterMs": latency_summary([r / 1000 for r in retry_after]) if retry_after else {},
            "outcomes": dict(Counter(s.outcome for s in self.samples)),
            "commitsPerCall": round(commits / calls, 2),
            "writeXactsPerCall": round(xids / calls, 2),
            "serverCpuMsPerCall": _per_call(self.after.server_cpu - self.before.server_cpu, calls),
            "postgresCpuMsPerCall": _per_call(
                self.after.postgres_cpu - self.before.postgres_cpu, calls
            ),
            "clientCpuMsPerCall": _per_call(self.after.client_cpu - self.before.client_cpu, calls),
            **self.extra,
        }


def _per_call(seconds: float, calls: int) -> float:
    return round(seconds * 1000 / calls, 2)


def print_summary(summary: dict[str, Any]) -> None:
    """One block per scenario."""

    def line(label: str, figures: dict[str, float]) -> str:
        if not figures.get("n"):
            return f"  {label:8s} n=0"
        return (
            f"  {label:8s} n={figures['n']:<6d} p50 {figures['p50']:9.2f}"
            f"  p95 {figures['p95']:9.2f}  p99 {figures['p99']:9.2f}  max {figures['max']:9.2f} ms"
        )

    print(f"\n== {summary['scenario']}: {summary['calls']} calls in {summary['elapsedS']} s,"
          f" {summary['okPerS']} ok/s")  # fmt: skip
    print(line("all", summary["all"]))
    print(line("ok", summary["ok"]))
    if summary["refused"].get("n"):
        print(line("refused", summary["refused"]))
        print(f"  retryAfterMs p50 {summary['retryAfterMs'].get('p50', 0):.0f}")
    print(f"  outcomes {summary['outcomes']}")
    print(f"  commits/call {summary['commitsPerCall']}  write xacts/call "
          f"{summary['writeXactsPerCall']}  service CPU {summary['serverCpuMsPerCall']} ms/call"
          f"  PostgreSQL CPU {summary['postgresCpuMsPerCall']} ms/call"
          f"  load generator CPU {summary['clientCpuMsPerCall']} ms/call")  # fmt: skip
    sys.stdout.flush()


Call = Callable[[int], Awaitable[Reply]]


async def timed(call: Call, n: int, origin: float) -> Sample:
    """Run one call under the client timeout and classify it."""
    began = time.perf_counter()
    try:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            reply = await call(n)
        outcome, retry_after = reply.outcome, reply.retry_after_ms
    except TimeoutError:
        outcome, retry_after = "CLIENT_TIMEOUT", None
    except httpx.HTTPError as exc:
        outcome, retry_after = f"CLIENT_{type(exc).__name__}", None
    ended = time.perf_counter()
    return Sample(began - origin, ended - began, outcome, retry_after)


async def sequential(call: Call, count: int, seconds: float = 3600.0) -> list[Sample]:
    """count calls one after another (fewer if `seconds` run out first)."""
    origin = time.perf_counter()
    samples = []
    for n in range(count):
        if time.perf_counter() - origin > seconds:
            break
        samples.append(await timed(call, n, origin))
    return samples


async def closed_loop(calls: list[Call], callers: int, seconds: float) -> list[Sample]:
    """callers loops, each calling again as soon as its call ends, for `seconds`.

    A refused caller waits its retryAfterMs first, as a Gateway passing the refusal to an
    agent would; without that a closed loop turns shedding into a hot retry loop.
    """
    origin = time.perf_counter()
    stop_at = origin + seconds
    samples: list[Sample] = []
    numbers = iter(range(10**9))

    async def loop(index: int) -> None:
        call = calls[index % len(calls)]
        while time.perf_counter() < stop_at:
            sample = await timed(call, next(numbers), origin)
            samples.append(sample)
            if sample.retry_after_ms:
                await asyncio.sleep(
                    min(sample.retry_after_ms / 1000, stop_at - time.perf_counter())
                )

    await asyncio.gather(*(loop(i) for i in range(callers)))
    return samples


async def open_loop(calls: list[Call], rate: float, seconds: float) -> list[Sample]:
    """Poisson arrivals at `rate` per second for `seconds`; waits (bounded) for stragglers."""
    origin = time.perf_counter()
    rng = random.Random(rate)
    pending: list[asyncio.Task[Sample]] = []
    next_at, n = origin, 0
    while next_at < origin + seconds:
        delay = next_at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        pending.append(asyncio.create_task(timed(calls[n % len(calls)], n, origin)))
        n += 1
        next_at += rng.expovariate(rate)
    done, late = await asyncio.wait(pending, timeout=DRAIN_LIMIT_S)
    for task in late:
        task.cancel()
    samples = [task.result() for task in done]
    samples += [Sample(0.0, DRAIN_LIMIT_S, "CLIENT_CANCELLED") for _ in late]
    return samples


def invoker(tenants: Tenants, host_id: str, kind: str, salt: int) -> Call:
    """A Call invoking one host's Tool of one kind with unique inputs."""
    gateway = tenants.callers[host_id]
    tool = tenants.tools[host_id][kind]

    async def call(n: int) -> Reply:
        return await gateway.call("workflow_invoke", tool.invoke_args(salt * 10**9 + n))

    return call


def starter(tenants: Tenants, host_id: str) -> Call:
    """A Call of workflow_start on the host's set1 definition (acceptance only)."""
    gateway = tenants.callers[host_id]
    wf_def_id = tenants.tools[host_id]["set1"].wf_def_id

    async def call(n: int) -> Reply:
        return await gateway.call("workflow_start", {"wfDefId": wf_def_id, "input": {"n": n}})

    return call


async def wait_quiet(service: Service, limit_s: float = 20.0) -> None:
    """Until no interactive or standard task is ready or running (bounded)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with psycopg.connect(service.database_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM workflow_task WHERE state IN ('ready', 'running')"
                " AND execution_class <> 'batch'"
            ).fetchone()
        if row is not None and row[0] == 0:
            return
        await asyncio.sleep(0.5)


@dataclass
class Bench:
    """The running stack, its tenants and the idle commit rate, plus collected summaries."""

    service: Service
    tenants: Tenants
    profile: Profile
    idle_commit_rate: float = 0.0
    idle_xid_rate: float = 0.0
    summaries: list[dict[str, Any]] = field(default_factory=list)
    salt: int = 0

    async def measure_idle(self, seconds: float = 3.0) -> None:
        """Commits per second of the idle service (executor polls, sweeps), subtracted later."""
        before = await read_meter(self.service)
        await asyncio.sleep(seconds)
        after = await read_meter(self.service)
        window = after.at - before.at
        self.idle_commit_rate = (after.commits - before.commits) / window
        self.idle_xid_rate = (after.xid - before.xid) / window

    async def run(
        self, name: str, body: Callable[[], Awaitable[list[Sample]]], **extra: Any
    ) -> None:
        """Measure one scenario and record its summary."""
        await wait_quiet(self.service)
        before = await read_meter(self.service)
        began = time.perf_counter()
        samples = await body()
        elapsed = time.perf_counter() - began
        after = await read_meter(self.service)
        result = Result(
            name, samples, elapsed, before, after, self.idle_commit_rate, self.idle_xid_rate, extra
        )
        summary = result.summary()
        self.summaries.append(summary)
        print_summary(summary)

    def calls(self, kind: str) -> list[Call]:
        """One invoking Call per host for kind (fresh inputs per scenario)."""
        self.salt += 1
        return [invoker(self.tenants, host, kind, self.salt) for host in self.tenants.hosts]


async def run_sequential(bench: Bench) -> None:
    """One caller, one host, each kind of workflow."""
    for kind in KINDS:
        call = bench.calls(kind)[0]
        count, seconds = bench.profile.sequential_calls, bench.profile.seconds
        await bench.run(
            f"sequential {kind}",
            lambda call=call, count=count, seconds=seconds: sequential(call, count, seconds),
        )


async def run_closed(bench: Bench) -> None:
    """Closed loops over the 8 hosts while another host keeps a batch backlog."""
    async with BatchBacklog(bench.service, bench.profile.backlog_depth) as backlog:
        for callers in bench.profile.closed_callers:
            calls = bench.calls("set1")
            seconds = bench.profile.seconds
            await bench.run(
                f"closed {callers} callers set1 (+batch backlog)",
                lambda calls=calls, callers=callers, seconds=seconds: closed_loop(
                    calls, callers, seconds
                ),
                callers=callers,
                batchBacklogDepth=bench.profile.backlog_depth,
            )
        print(f"  batch runs admitted to keep the backlog: {backlog.admitted}")


async def run_open(bench: Bench) -> None:
    """Open loops at fixed arrival rates over the 8 hosts."""
    for rate in bench.profile.open_rates:
        calls = bench.calls("set1")
        # Beyond capacity every second of arrivals is minutes of backlog without shedding.
        seconds = min(bench.profile.seconds, OPEN_LOOP_MAX_S)
        await bench.run(
            f"open {rate}/s set1",
            lambda calls=calls, rate=rate, seconds=seconds: open_loop(calls, rate, seconds),
            offeredPerS=rate,
        )


async def run_start(bench: Bench) -> None:
    """workflow_start acceptance at concurrent callers (the runs execute afterwards)."""
    calls = [starter(bench.tenants, host) for host in bench.tenants.hosts]
    callers = bench.profile.start_callers
    await bench.run(
        f"workflow_start {callers} callers",
        lambda: closed_loop(calls, callers, bench.profile.seconds / 2),
        callers=callers,
    )


async def three_commits(database_url: str, samples: int) -> list[Sample]:
    """The floor: three write transactions in a row on one connection."""
    out = []
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        origin = time.perf_counter()
        for _ in range(samples):
            began = time.perf_counter()
            for _ in range(3):
                async with conn.transaction():
                    await conn.execute("SELECT txid_current()")
            out.append(Sample(began - origin, time.perf_counter() - began, "OK"))
    return out


async def run_floors(bench: Bench) -> None:
    """The three-commit psycopg sequence, and tools/list with both tokens."""
    samples = bench.profile.floor_samples
    await bench.run(
        "floor three-commit psycopg", lambda: three_commits(bench.service.database_url, samples)
    )
    gateway = bench.tenants.callers[bench.tenants.hosts[0]]

    async def tools_list(n: int) -> Reply:
        return await gateway.request("tools/list", {})

    await bench.run("floor tools/list", lambda: sequential(tools_list, samples))  # fmt: skip


RUNNERS: dict[str, Callable[[Bench], Awaitable[None]]] = {
    "sequential": run_sequential,
    "closed": run_closed,
    "open": run_open,
    "start": run_start,
    "floors": run_floors,
}


async def bench_main(args: argparse.Namespace, service: Service) -> list[dict[str, Any]]:
    """Publish the tenants, then run the chosen scenarios in order."""
    profile = QUICK if args.quick else FULL
    if args.seconds is not None:
        profile.seconds = args.seconds
    # One client per host like one Gateway connection pool per route; small pools, because
    # httpx scans its pool per request and thousands of connections cost the client more CPU
    # than the service. Calls beyond a pool's size wait for a connection (counted in latency).
    limits = httpx.Limits(max_connections=CONNECTIONS_PER_HOST)
    timeout = httpx.Timeout(CALL_TIMEOUT_S + 5, pool=None)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(limits=limits, timeout=timeout))
            for _ in range(HOSTS)
        ]
        began = time.perf_counter()
        tenants = await publish_tenants(service, clients, KINDS)
        print(
            f"published {len(KINDS)} Tools on {HOSTS} hosts in {time.perf_counter() - began:.1f} s"
        )
        bench = Bench(service, tenants, profile)
        await bench.measure_idle()
        print(
            f"idle: {bench.idle_commit_rate:.1f} commits/s, {bench.idle_xid_rate:.1f} write"
            " xacts/s (subtracted from the per-call figures)"
        )
        for name in args.only:
            await RUNNERS[name](bench)
    return bench.summaries


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.invoke", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated subset")
    parser.add_argument("--quick", action="store_true", help="small smoke-sized run")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per loop scenario")
    parser.add_argument("--out", default=None, help="write the summaries as JSON here")
    parser.add_argument("--fast", action="store_true", help="embedded PostgreSQL without fsync")
    parser.add_argument(
        "--config", default=None, help="JSON merged into the service config (per section)"
    )
    args = parser.parse_args(argv)
    args.only = [name for name in args.only.split(",") if name]
    unknown = set(args.only) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; choose from {SCENARIOS}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when it completed (figures are reported, not judged)."""
    args = _parse(argv)
    extra = json.loads(args.config) if args.config else {}
    began = time.perf_counter()
    with (
        database(args.fast) as (url, postmaster_pid),
        running_service(url, postmaster_pid, extra) as service,
    ):
        summaries = asyncio.run(bench_main(args, service))
    report = {
        "scenarios": summaries,
        "quick": args.quick,
        "fast": args.fast,
        "config": extra,
        "totalS": round(time.perf_counter() - began, 1),
    }
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)
    print(f"\ntotal {report['totalS']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
