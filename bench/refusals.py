"""Benchmark (not a test): what a refusal costs next to an admitted call, on ONE Tool.

    make bench-refusals ARGS="[--rates 400,800,1200,1600] [--seconds 5] [--repeat 2]
                              [--set capacity.door_admitting=2] [--out results.json]"

Starts PostgreSQL (fsync on), the example backend and our server (bench/harness.py), publishes
one `decide` Tool as bench-peers does, and drives it with bench-peers' lean driver in open
loops (Poisson arrivals) at each rate, the rates `--repeat` times over. The top rates are
above what one process serves, so the front door refuses the excess. Per loop it prints
goodput, refusals, refusal and admitted p50, and the server's CPU; at the end a least-squares
fit of the server's CPU over every loop to (admitted calls, refused calls): the server's
milliseconds per admitted call and per refusal.

`--set` takes the same SECTION.KEY=JSON settings as bench-peers, to compare door settings in
separate runs (docs/PERFORMANCE.md: 2, 4 and 16 admissions at once).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import uvloop

from bench.harness import Service, cpu_seconds, database, new_id, running_service
from bench.peers import driver
from bench.peers.driver import Target
from bench.peers.run import direct_callers, publish, setting_overrides, tool_names, user_tokens

WARMUP_CALLS = 50


def per_call_fit(loops: list[dict[str, Any]]) -> dict[str, float | None]:
    """Least squares of server CPU seconds = a * admitted + b * refused; a and b in ms."""
    xx = sum(loop["ok"] ** 2 for loop in loops)
    yy = sum(loop["refused"] ** 2 for loop in loops)
    xy = sum(loop["ok"] * loop["refused"] for loop in loops)
    xz = sum(loop["ok"] * loop["serverCpuS"] for loop in loops)
    yz = sum(loop["refused"] * loop["serverCpuS"] for loop in loops)
    det = xx * yy - xy * xy
    if det == 0:
        return {"serverMsPerAdmitted": None, "serverMsPerRefusal": None}
    admitted = (xz * yy - yz * xy) / det
    refused = (xx * yz - xy * xz) / det
    return {
        "serverMsPerAdmitted": round(admitted * 1000, 3),
        "serverMsPerRefusal": round(refused * 1000, 3),
    }


async def door_refusals(service: Service) -> float:
    """The server's count of calls its front door refused (its /metrics)."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{service.base_url}/metrics")).text
    for line in text.splitlines():
        if line.startswith("workflow_door_refusals_total "):
            return float(line.split()[1])
    return 0.0


async def drive(service: Service, host_id: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every open loop, in order; one record each."""
    names = tool_names()[:1]
    tools = await publish(service, host_id, names)
    target = Target(
        "ours-direct",
        service.mcp_url,
        direct_callers([tools[names[0]]], user_tokens(service, host_id)),
        new_id()[:8],
    )
    await driver.sequential(target, WARMUP_CALLS, 30.0)
    loops = []
    for rate in [r for _ in range(args.repeat) for r in args.rates]:
        door_before = await door_refusals(service)
        with driver.collector_paused():
            cpu, began = cpu_seconds(service.server.pid), time.perf_counter()
            samples = await driver.open_loop(target, rate, args.seconds, seed=rate + len(loops))
            elapsed = time.perf_counter() - began
        summary = driver.summarize(samples, elapsed, args.seconds)
        loop = {
            "offeredPerS": rate,
            "ok": summary["ok"],
            "okPerS": summary["okPerS"],
            "refused": sum(summary["refusedByCode"].values()),
            "refusedAtDoor": round(await door_refusals(service) - door_before),
            "refusalP50Ms": summary["refusal"]["p50"],
            "admittedP50Ms": summary["admitted"]["p50"],
            "serverCpuS": round(cpu_seconds(service.server.pid) - cpu, 3),
            "elapsedS": round(elapsed, 3),
            "transportErrors": summary["transportErrors"],
            "http5xx": summary["http5xx"],
        }
        loops.append(loop)
        print(
            f"open {rate}/s: {loop['okPerS']} ok/s ({loop['ok']} ok), {loop['refused']} refused"
            f" ({loop['refusedAtDoor']} at the door) at p50 {loop['refusalP50Ms']} ms,"
            f" admitted p50 {loop['admittedP50Ms']} ms;"
            f" server {loop['serverCpuS'] / elapsed:.2f} core",
            flush=True,
        )
        await asyncio.sleep(1.0)
    return loops


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.refusals", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rates",
        type=lambda text: [int(rate) for rate in text.split(",")],
        default=[400, 800, 1200, 1600],
        help="offered calls per second, comma-separated",
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per open loop")
    parser.add_argument("--repeat", type=int, default=2, help="times over the rates")
    parser.add_argument(
        "--set", action="append", default=[], metavar="SECTION.KEY=JSON",
        help="a setting of our service, e.g. capacity.door_admitting=2 (repeatable)",
    )  # fmt: skip
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the loops and print the fit; 0 when it completed (figures, not judgements)."""
    args = _parse(argv)
    extra = setting_overrides(args.set)
    with ExitStack() as stack:
        url, postmaster = stack.enter_context(database(fast=False))
        service = stack.enter_context(running_service(url, postmaster, extra))
        loops = uvloop.run(drive(service, new_id(), args))
    fit = per_call_fit(loops)
    print(
        f"server CPU: {fit['serverMsPerAdmitted']} ms per admitted call,"
        f" {fit['serverMsPerRefusal']} ms per refusal (least squares over {len(loops)} loops)"
    )
    if args.out:
        results = {"settings": extra, "loops": loops, "fit": fit}
        Path(args.out).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
