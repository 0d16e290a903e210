"""Benchmark (not a test): what the reference Gateway adds to one sequential call, A/B in one run.

    .venv/bin/python -m bench.gateway_overhead [--calls N]

One embedded PostgreSQL 15 (fsync on), our server and the Gateway (bench.peers.stack), one
published `decide` Tool. Then N rounds, each one call of every leg in turn (interleaved, so the
machine's noise hits every leg alike), one keep-alive connection per leg:

- direct: `workflow_invoke` POSTed to our /mcp as bench-peers' ours-direct does (modern era);
- direct-legacy: the same call exactly as the Gateway sends it (2025-11-25 era, no `_meta`);
- gateway: `tools/call decide` on the Gateway.

Prints p50/p95 per leg, the Gateway-minus-direct p50, and CPU per call: the Gateway process's
(only gateway calls reach it) and the server's, read from /proc around every call and summed
per leg (10 ms ticks: only the sum over many calls means anything).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field

from bench.harness import REPO, Service, cpu_seconds, database, new_id, running_service
from bench.peers import driver
from bench.peers.driver import Caller, Target
from bench.peers.run import direct_callers, named_callers, publish, user_tokens
from bench.peers.stack import running_gateway
from bench.workload import Tool
from runtime.mcp.protocol import LEGACY_VERSION


@dataclass
class Leg:
    """One way of making the call, and what it cost."""

    target: Target
    latencies: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    server_cpu: float = 0.0
    gateway_cpu: float = 0.0


def legacy(caller: Caller) -> Caller:
    """The direct call as the Gateway sends it: the 2025-11-25 era, no _meta, no Mcp-* headers."""
    head, middle, tail = caller.parts
    meta = ',"_meta":' + json.dumps(driver.META, separators=(",", ":"))
    headers = {k: v for k, v in caller.headers.items() if k not in ("Mcp-Method", "Mcp-Name")} | {
        "MCP-Protocol-Version": LEGACY_VERSION
    }
    return Caller(headers, (head, middle, tail.replace(meta.encode(), b"", 1)))


def quantiles(values: list[float]) -> str:
    """p50/p95 in ms."""
    ordered = sorted(values)
    if not ordered:
        return "-"
    return (
        f"p50 {driver.quantile(ordered, 0.5):6.2f}  p95 {driver.quantile(ordered, 0.95):6.2f}  "
        f"mean {sum(ordered) * 1000 / len(ordered):6.2f}"
    )


async def rounds(legs: list[Leg], calls: int, warmup: int, server_pid: int, gw_pid: int) -> None:
    """calls rounds of one call per leg (after warmup unmeasured rounds)."""
    clients = [leg.target.connection() for leg in legs]
    prefix = f"{new_id()[:8]}-"
    try:
        for n in range(warmup + calls):
            for index, (leg, http) in enumerate(zip(legs, clients, strict=True)):
                before_s, before_g = cpu_seconds(server_pid), cpu_seconds(gw_pid)
                sample = await driver.one_call(
                    http, leg.target, f"{prefix}{index}-", n, time.perf_counter()
                )
                after_s, after_g = cpu_seconds(server_pid), cpu_seconds(gw_pid)
                if n < warmup:
                    continue
                if sample.outcome != "OK":
                    leg.failures[sample.outcome] = leg.failures.get(sample.outcome, 0) + 1
                    continue
                leg.latencies.append(sample.latency)
                leg.server_cpu += after_s - before_s
                leg.gateway_cpu += after_g - before_g
    finally:
        for http in clients:
            http.close()


def legs_for(service: Service, gateway_url: str, tools: dict[str, Tool], users: int) -> list[Leg]:
    """The three legs, each round-robin over `users` callers of one host."""
    host_id = tools["decide"].host_id
    auths = user_tokens(service, host_id)[:users]
    direct = direct_callers([tools["decide"]], auths)
    run_id = new_id()[:8]
    gateway = named_callers(["decide"], auths)
    return [
        Leg(Target("direct", service.mcp_url, direct, run_id)),
        Leg(Target("direct-legacy", service.mcp_url, [legacy(c) for c in direct], run_id)),
        Leg(Target("gateway", gateway_url, gateway, run_id)),
    ]


def spy_on(pid: int, out: str | None) -> subprocess.Popen[bytes] | None:
    """py-spy recording pid's stacks (collapsed, raw) into out, when asked."""
    if not out:
        return None
    spy = subprocess.Popen(
        [str(REPO / ".venv/bin/py-spy"), "record", "--pid", str(pid), "--format", "raw",
         "--rate", "500", "--nonblocking", "-o", out],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)
    return spy


def report(legs: list[Leg], calls: int, elapsed: float) -> None:
    """p50/p95 and CPU per call of every leg; Gateway minus direct."""
    print(f"{calls} rounds in {elapsed:.1f} s")
    for leg in legs:
        ok = max(1, len(leg.latencies))
        print(
            f"{leg.target.name:14s} n={len(leg.latencies):4d} {quantiles(leg.latencies)}  "
            f"server CPU {leg.server_cpu * 1000 / ok:5.2f} ms/call  "
            f"gateway CPU {leg.gateway_cpu * 1000 / ok:5.2f} ms/call  failures {leg.failures}"
        )
    by_name = {leg.target.name: leg for leg in legs}
    gw, dr = sorted(by_name["gateway"].latencies), sorted(by_name["direct"].latencies)
    if gw and dr:
        delta = driver.quantile(gw, 0.5) - driver.quantile(dr, 0.5)
        print(f"gateway - direct p50: {delta:+.2f} ms")


def closed(target: Target, callers: int, gateway_pid: int) -> None:
    """A closed loop on the Gateway: goodput, admitted p50/p95, Gateway CPU per call."""
    before = cpu_seconds(gateway_pid)
    samples = asyncio.run(driver.closed_loop(target, callers, 5.0))
    spent = cpu_seconds(gateway_pid) - before
    ok = [s.latency for s in samples if s.outcome == "OK"]
    print(
        f"closed c={callers}: {len(samples)} calls, {len(ok)} ok ({len(ok) / 5.0:.0f}/s), "
        f"ok {quantiles(ok)}, gateway CPU {spent * 1000 / max(1, len(samples)):.2f} ms/call"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(prog="bench.gateway_overhead")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--py-spy", default=None, help="record the Gateway (collapsed stacks)")
    parser.add_argument(
        "--after-overload", type=float, default=0.0, metavar="RATE",
        help="first offer RATE/s of direct calls for 6 s (bench-peers' open loops), then measure",
    )  # fmt: skip
    parser.add_argument(
        "--closed", type=int, default=0, metavar="C",
        help="then a closed loop of C callers for 5 s on the Gateway (its CPU per call)",
    )  # fmt: skip
    parser.add_argument("--users", type=int, default=8, help="distinct callers, round-robin")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        url, postmaster = stack.enter_context(database(fast=False))
        service = stack.enter_context(running_service(url, postmaster, {}))
        tools = asyncio.run(publish(service, new_id(), ["decide"]))
        gateway = stack.enter_context(running_gateway(service, tools["decide"].host_id, tools))
        legs = legs_for(service, gateway.mcp_url, tools, args.users)
        if args.after_overload:
            overload = asyncio.run(driver.open_loop(legs[0].target, args.after_overload, 6.0))
            print(f"overload: {len(overload)} calls offered at {args.after_overload}/s")
            time.sleep(1.0)  # bench-peers' settle time between phases
        spy = spy_on(gateway.pid, args.py_spy)
        began = time.perf_counter()
        asyncio.run(rounds(legs, args.calls, args.warmup, service.server.pid, gateway.pid))
        elapsed = time.perf_counter() - began
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=30)
        if legs[-1].failures:
            print(gateway.log_tail(4000))
        report(legs, args.calls, elapsed)
        if args.closed:
            closed(legs[-1].target, args.closed, gateway.pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
