"""Benchmark (not a test): goodput of ONE Tool under overload, with clients that retry at once.

    .venv/bin/python -m bench.overload [--seconds 8] [--sync-wait-ms 2000] [--fast]
                                       [--peak-callers 10,15,20] [--callers 50,200]
                                       [--open-factor 2] [--out results.json] [--config JSON]

Starts PostgreSQL, the example backend and the real service (bench/harness.py), publishes one
set1 Tool with unlimited admission limits and a short syncWaitMs (so the deadline binds), then:

- peak: closed loops at each --peak-callers; the best ok/s is the peak goodput;
- closed c=N: N closed-loop callers that call again at once after any answer, a
  WORKFLOW_CAPACITY_EXHAUSTED included (ignoring retryAfterMs: the worst client);
- open: Poisson arrivals at --open-factor x peak for --seconds.

For each it prints goodput (answers OK within syncWaitMs per second) and % of peak, admitted
p50/p99, refusal p50/p99, how many refusals carried retryAfterMs, and service CPU per call.
Latencies are given twice: as the client saw them, and as the service measured them (its
access log's tools/call duration, from dispatch to answer). The load generator shares the
machine and is one Python process: when its CPU share nears 100% it is the bottleneck, and
client latencies include its own queueing; goodput then counts the service's own durations.
The service CPU of a refusal is estimated from the peak run (CPU per admitted call, nothing
refused) and each overload run: (CPU - admitted x per-admitted) / refused.
Every loop is bounded by --seconds and the client timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Reply, Service, database, gateway_for, new_id, running_service
from bench.invoke import Sample, open_loop, quantile, timed, wait_quiet
from bench.workload import CALLER_ROLES, OWNER, publish_tool

CALL_TIMEOUT_S = 25.0
REFUSED = "WORKFLOW_CAPACITY_EXHAUSTED"


@dataclass
class Run:
    """One scenario's samples, wall time, service and client CPU, and server-side durations."""

    name: str
    samples: list[Sample]
    seconds: float
    server_cpu_s: float
    client_cpu_s: float = 0.0
    # workflow_invoke (outcome, ms) from the service's access log during the run.
    served: list[tuple[str, float]] = field(default_factory=list)

    def admitted(self) -> list[Sample]:
        """Calls answered with their result."""
        return [s for s in self.samples if s.outcome == "OK"]

    def refused(self) -> list[Sample]:
        """Calls shed with WORKFLOW_CAPACITY_EXHAUSTED."""
        return [s for s in self.samples if s.outcome == REFUSED]


async def closed_loop_hot(call: Any, callers: int, seconds: float) -> list[Sample]:
    """callers loops that call again at once after every answer (refusals included)."""
    origin = time.perf_counter()
    stop_at = origin + seconds
    samples: list[Sample] = []
    numbers = iter(range(10**9))

    async def loop() -> None:
        while time.perf_counter() < stop_at:
            samples.append(await timed(call, next(numbers), origin))

    await asyncio.gather(*(loop() for _ in range(callers)))
    return samples


def _ms(samples: list[Sample], q: float) -> float:
    return quantile(sorted(s.latency for s in samples), q)


def _served_ms(run: Run, outcome: str, q: float) -> float:
    return quantile(sorted(ms / 1000 for code, ms in run.served if code == outcome), q)


def served_calls(log_path: Path, offset: int) -> tuple[list[tuple[str, float]], int]:
    """workflow_invoke outcomes and durations logged after offset; the new offset."""
    calls = []
    with log_path.open("rb") as log:
        log.seek(offset)
        data = log.read()
    for line in data.splitlines():
        if b"workflow_invoke" not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("logger") == "workflow.access" and "duration_ms" in record:
            calls.append((str(record.get("outcome")), float(record["duration_ms"])))
    return calls, offset + len(data)


def summarize(run: Run, sync_wait_ms: int, peak: float | None) -> dict[str, Any]:
    """The figures of one run (goodput: answered OK within syncWaitMs)."""
    admitted, refused = run.admitted(), run.refused()
    good = [s for s in admitted if s.latency * 1000 <= sync_wait_ms]
    served_good = sum(1 for code, ms in run.served if code == "ok" and ms <= sync_wait_ms)
    goodput = len(good) / run.seconds if run.seconds else 0.0
    served_goodput = served_good / run.seconds if run.seconds else 0.0
    with_hint = sum(1 for s in refused if s.retry_after_ms)
    hints = sorted(s.retry_after_ms for s in refused if s.retry_after_ms)
    return {
        "scenario": run.name,
        "calls": len(run.samples),
        "seconds": round(run.seconds, 2),
        "goodputPerS": round(goodput, 1),
        "pctOfPeak": round(100 * goodput / peak, 1) if peak else None,
        "servedGoodputPerS": round(served_goodput, 1),
        "servedPctOfPeak": round(100 * served_goodput / peak, 1) if peak else None,
        "servedAdmittedP50Ms": round(_served_ms(run, "ok", 0.5), 1),
        "servedAdmittedP99Ms": round(_served_ms(run, "ok", 0.99), 1),
        "servedRefusalP50Ms": round(_served_ms(run, REFUSED, 0.5), 3),
        "servedRefusalP99Ms": round(_served_ms(run, REFUSED, 0.99), 3),
        "clientCpuShare": round(run.client_cpu_s / run.seconds, 2) if run.seconds else None,
        "admitted": len(admitted),
        "admittedP50Ms": round(_ms(admitted, 0.5), 1),
        "admittedP99Ms": round(_ms(admitted, 0.99), 1),
        "admittedOverDeadline": len(admitted) - len(good),
        "refused": len(refused),
        "refusedPct": round(100 * len(refused) / max(1, len(run.samples)), 1),
        "refusalP50Ms": round(_ms(refused, 0.5), 2),
        "refusalP99Ms": round(_ms(refused, 0.99), 2),
        "refusalsWithRetryAfter": with_hint,
        "retryAfterP50Ms": hints[len(hints) // 2] if hints else None,
        "outcomes": dict(Counter(s.outcome for s in run.samples)),
        "serverCpuMsPerCall": round(run.server_cpu_s * 1000 / max(1, len(run.samples)), 3),
    }


def print_summary(figures: dict[str, Any]) -> None:
    """One block per scenario."""
    print(
        f"\n== {figures['scenario']}: {figures['calls']} calls in {figures['seconds']} s;"
        f" goodput {figures['goodputPerS']}/s ({figures['pctOfPeak']}% of peak)\n"
        f"  admitted {figures['admitted']}: p50 {figures['admittedP50Ms']} ms,"
        f" p99 {figures['admittedP99Ms']} ms, {figures['admittedOverDeadline']} past syncWaitMs\n"
        f"  refused {figures['refused']} ({figures['refusedPct']}%): p50"
        f" {figures['refusalP50Ms']} ms, p99 {figures['refusalP99Ms']} ms,"
        f" {figures['refusalsWithRetryAfter']} with retryAfterMs"
        f" (p50 {figures['retryAfterP50Ms']})\n"
        f"  outcomes {figures['outcomes']}  service CPU {figures['serverCpuMsPerCall']} ms/call\n"
        f"  as served: goodput {figures['servedGoodputPerS']}/s"
        f" ({figures['servedPctOfPeak']}% of peak), admitted p50"
        f" {figures['servedAdmittedP50Ms']} ms p99 {figures['servedAdmittedP99Ms']} ms,"
        f" refusal p50 {figures['servedRefusalP50Ms']} ms p99 {figures['servedRefusalP99Ms']} ms;"
        f" load generator CPU share {figures['clientCpuShare']}"
    )
    sys.stdout.flush()


async def measure(service: Service, name: str, body: Any) -> Run:
    """Run one scenario after the queue is quiet; its wall time and service CPU."""
    await wait_quiet(service)
    _, offset = served_calls(service.log_path, 0)
    cpu, client = service.server_cpu(), time.process_time()
    began = time.perf_counter()
    samples = await body()
    seconds = time.perf_counter() - began
    run = Run(name, samples, seconds, service.server_cpu() - cpu, time.process_time() - client)
    # The access records of calls still answering land within a moment.
    await asyncio.sleep(0.5)
    run.served, _ = served_calls(service.log_path, offset)
    return run


def refusal_cpu_ms(run: Run, per_admitted_s: float) -> float | None:
    """Service CPU of one refusal, given the CPU of one admitted call (ms; None: no refusals)."""
    refused = len(run.refused())
    if not refused:
        return None
    rest = run.server_cpu_s - per_admitted_s * (len(run.samples) - refused)
    return round(max(0.0, rest) * 1000 / refused, 3)


async def bench_main(args: argparse.Namespace, service: Service) -> dict[str, Any]:
    """Publish one Tool, find the peak, then overload it."""
    limits = httpx.Limits(max_connections=max(args.callers + args.peak_callers) + 16)
    timeout = httpx.Timeout(CALL_TIMEOUT_S + 5, pool=None)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as http:
        host_id = new_id()
        owner = gateway_for(service, http, host_id, OWNER, CALLER_ROLES)
        tool = await publish_tool(
            owner, service, host_id, "set1", syncWaitMs=args.sync_wait_ms, totalDeadlineMs=30000
        )
        caller = gateway_for(service, http, host_id, "bench-caller", CALLER_ROLES)
        salt = iter(range(1, 10**6))

        def fresh_call() -> Any:
            base = next(salt) * 10**9

            async def call(n: int) -> Reply:
                return await caller.call("workflow_invoke", tool.invoke_args(base + n))

            return call

        # Warm-up: the process learns the Tool's budget and its service time.
        await closed_loop_hot(fresh_call(), 4, 2.0)
        runs: list[tuple[Run, dict[str, Any]]] = []
        peak, peak_run = 0.0, None
        for callers in args.peak_callers:
            run = await measure(
                service,
                f"peak c={callers}",
                functools.partial(closed_loop_hot, fresh_call(), callers, args.seconds),
            )
            figures = summarize(run, args.sync_wait_ms, None)
            if figures["goodputPerS"] > peak:
                peak, peak_run = figures["goodputPerS"], run
            runs.append((run, figures))
            print_summary(figures)
        assert peak_run is not None
        per_admitted_s = peak_run.server_cpu_s / max(1, len(peak_run.samples))
        print(f"\npeak goodput {peak}/s; service CPU {per_admitted_s * 1000:.2f} ms per call there")
        for callers in args.callers:
            run = await measure(
                service,
                f"closed c={callers} immediate retry",
                functools.partial(closed_loop_hot, fresh_call(), callers, args.seconds),
            )
            figures = summarize(run, args.sync_wait_ms, peak)
            figures["refusalCpuMs"] = refusal_cpu_ms(run, per_admitted_s)
            runs.append((run, figures))
            print_summary(figures)
            print(f"  estimated service CPU per refusal {figures['refusalCpuMs']} ms")
        rate = args.open_factor * peak
        if rate <= 0:
            return {
                "peakGoodputPerS": peak,
                "serviceCpuMsPerAdmitted": round(per_admitted_s * 1000, 3),
                "scenarios": [figures for _, figures in runs],
            }
        run = await measure(
            service,
            f"open {rate:.0f}/s ({args.open_factor}x peak)",
            functools.partial(open_loop, [fresh_call()], rate, args.seconds),
        )
        figures = summarize(run, args.sync_wait_ms, peak)
        figures["refusalCpuMs"] = refusal_cpu_ms(run, per_admitted_s)
        runs.append((run, figures))
        print_summary(figures)
        print(f"  estimated service CPU per refusal {figures['refusalCpuMs']} ms")
    return {
        "peakGoodputPerS": peak,
        "serviceCpuMsPerAdmitted": round(per_admitted_s * 1000, 3),
        "scenarios": [figures for _, figures in runs],
    }


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.overload", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per scenario")
    parser.add_argument("--sync-wait-ms", type=int, default=2000, help="the Tool's syncWaitMs")
    parser.add_argument("--peak-callers", default="10,15,20", help="closed loops for the peak")
    parser.add_argument("--callers", default="50,200", help="overload closed loops")
    parser.add_argument("--open-factor", type=float, default=2.0, help="open loop x peak; 0: none")
    parser.add_argument("--fast", action="store_true", help="embedded PostgreSQL without fsync")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    parser.add_argument("--config", default=None, help="JSON merged into the service config")
    args = parser.parse_args(argv)
    args.peak_callers = [int(n) for n in args.peak_callers.split(",") if n]
    args.callers = [int(n) for n in args.callers.split(",") if n]
    if not args.peak_callers or args.seconds <= 0 or args.seconds > 120:
        parser.error("need --peak-callers and 0 < --seconds <= 120")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when it completed (figures are reported, not judged)."""
    args = _parse(argv)
    extra = json.loads(args.config) if args.config else {}
    with (
        database(args.fast) as (url, postmaster_pid),
        running_service(url, postmaster_pid, extra) as service,
    ):
        report = asyncio.run(bench_main(args, service))
    report["config"] = extra
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
