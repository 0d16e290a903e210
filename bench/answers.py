"""Benchmark (not a test): does every call get an HTTP answer under overload?

    .venv/bin/python -m bench.answers [--mode closed|open] [--callers 200] [--rate 150]
                                      [--seconds 20] [--kind set1] [--fast] [--config JSON]
                                      [--keepalive-expiry S] [--out results.json]

Starts PostgreSQL, the backend and the real server (bench.harness), publishes one Tool on one
host, then drives it over httpx: `closed` runs `--callers` loops on the one Tool (a refused
caller waits its retryAfterMs, as a Gateway would), `open` sends Poisson arrivals at `--rate`
per second. It counts every outcome and, apart, every call that ended without an HTTP answer
(ReadError, RemoteProtocolError, ...) or with a 5xx: the invariant is that there are none.
Loopback only; every loop is bounded.

Measured on the shared 2-core machine (other engineers' suites running), `--fast`, set1, 20 s,
httpx with 200 connections and its default 5 s idle reuse (SHED: WORKFLOW_CAPACITY_EXHAUSTED):

    run                                  unanswered  outcomes
    closed 200, keep-alive 5 s (before)  2 ReadError 597 OK, 492 SHED
    closed 200, client reuse 1 s         0           1304 OK, 672 SHED
    open 150/s, keep-alive 5 s (before)  2 ReadError 1743 OK, 452 SHED, 755 CLIENT_TIMEOUT
    closed 200, keep-alive 75 s (after)  0           345 OK, 457 SHED
    closed 200, keep-alive 75 s (after)  0           290 OK, 493 SHED
    open 150/s, keep-alive 75 s (after)  0           845 OK, 817 SHED, 1290 CLIENT_TIMEOUT
    open 150/s, 1000 connections (after) 0           833 OK, 374 SHED, 1745 CLIENT_TIMEOUT
    closed 200, after, keep_alive 5 s    4 ReadError 229 OK, 603 SHED  (--config, the old value)

The ReadErrors were uvicorn's 5 s keep-alive meeting httpx's 5 s idle reuse: a client sent
its next request on a connection the server was closing (a shorter client reuse made them go
away; `server.keep_alive_timeout_s` is 75 s now). CLIENT_TIMEOUT is the driver giving up after
25 s with the request still unanswered: a load above capacity that admission did not shed in
time (answers later than the Gateway's syncWaitMs + 2 s), not a closed connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from typing import Any

import httpx

from bench.harness import Service, database, gateway_for, new_id, running_service
from bench.invoke import CALL_TIMEOUT_S, Sample, closed_loop, open_loop, timed
from bench.workload import CALLER_ROLES, OWNER, publish_tool


def dropped(outcome: str) -> bool:
    """A call that ended without an HTTP answer, or with a server error."""
    return (outcome.startswith("CLIENT_") and outcome != "CLIENT_TIMEOUT") or outcome.startswith(
        "HTTP_5"
    )


async def drive(args: argparse.Namespace, service: Service) -> dict[str, Any]:
    """Publish one Tool and run the chosen loop against it; the outcome counts."""
    limits = httpx.Limits(
        max_connections=args.connections,
        max_keepalive_connections=args.connections,
        keepalive_expiry=args.keepalive_expiry,
    )
    timeout = httpx.Timeout(CALL_TIMEOUT_S + 5, pool=None)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as http:
        host_id = new_id()
        owner = gateway_for(service, http, host_id, OWNER, CALLER_ROLES)
        tool = await publish_tool(owner, service, host_id, args.kind)
        caller = gateway_for(service, http, host_id, "bench-caller", CALLER_ROLES)

        async def call(n: int) -> Any:
            return await caller.call("workflow_invoke", tool.invoke_args(n))

        began = time.perf_counter()
        samples: list[Sample]
        if args.mode == "closed":
            samples = await closed_loop([call], args.callers, args.seconds)
        else:
            samples = await open_loop([call], args.rate, args.seconds)
        elapsed = time.perf_counter() - began
        # One more call after the load: the service still answers.
        after = await timed(call, 10**9, time.perf_counter())
    outcomes = Counter(s.outcome for s in samples)
    return {
        "mode": args.mode,
        "callers": args.callers if args.mode == "closed" else None,
        "ratePerS": args.rate if args.mode == "open" else None,
        "seconds": args.seconds,
        "elapsedS": round(elapsed, 1),
        "calls": len(samples),
        "outcomes": dict(outcomes),
        "unanswered": sum(n for outcome, n in outcomes.items() if dropped(outcome)),
        "afterLoad": after.outcome,
        "serverLogErrors": [
            line for line in service.log_tail(200_000).splitlines() if '"level": "ERROR"' in line
        ][-5:],
    }


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.answers", description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("closed", "open"), default="closed")
    parser.add_argument("--callers", type=int, default=200)
    parser.add_argument("--rate", type=float, default=150.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--kind", default="set1", help="set1, set8, http1 or http8")
    parser.add_argument("--connections", type=int, default=200, help="the client's pool size")
    parser.add_argument(
        "--keepalive-expiry", type=float, default=5.0, help="the client's idle reuse (httpx: 5)"
    )
    parser.add_argument("--fast", action="store_true", help="embedded PostgreSQL without fsync")
    parser.add_argument("--config", default=None, help="JSON merged into the service config")
    parser.add_argument("--out", default=None, help="write the result as JSON here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one loop; 0 when every call got an answer, 1 otherwise."""
    args = _parse(argv)
    extra = json.loads(args.config) if args.config else {}
    with (
        database(args.fast) as (url, postmaster_pid),
        running_service(url, postmaster_pid, extra) as service,
    ):
        result = asyncio.run(drive(args, service))
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
    return 0 if result["unanswered"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
