"""Profiling aid (not a test): service CPU per sequential one-task workflow_invoke on one Tool.

    .venv/bin/python -m bench.profile_invoke [--calls 400] [--concurrent 0] [--fast]
                                             [--pyspy out.txt] [--rounds 1] [--statements]

Starts PostgreSQL and the real server (bench/harness.py), publishes one set1 Tool, warms up,
then runs `--calls` sequential workflow_invoke calls through POST /mcp on one reused httpx
client (and `--concurrent` callers sharing the calls, if given) and prints the service's and
PostgreSQL's CPU ms per call. With `--pyspy FILE` it records the server with py-spy (raw
collapsed stacks) while the load runs, for reading where the time goes. With `--statements`
it counts the SQL statements PostgreSQL ran per sequential call, net of an idle window of the
same length: a count, unlike CPU time, that a busy machine does not blur, so a change that
adds a round trip to the invoke path shows as +1.00 whatever else runs. Every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench import harness
from bench.harness import CLOCK_TICKS, Service, database, gateway_for, running_service
from bench.workload import CALLER_ROLES, OWNER, publish_tool

WARMUP_CALLS = 50
CALL_TIMEOUT_S = 30.0
IDLE_S = 3.0


async def _load(
    service: Service,
    calls: int,
    concurrent: int,
    rounds: int,
    pyspy: str | None,
    cprofile: str | None = None,
    statements: StatementLog | None = None,
) -> list[str]:
    lines = []
    timeout = httpx.Timeout(CALL_TIMEOUT_S)
    async with httpx.AsyncClient(timeout=timeout) as http:
        host_id = "7a3c6f8e-0000-4000-8000-000000000001"
        owner = gateway_for(service, http, host_id, OWNER, CALLER_ROLES)
        tool = await publish_tool(owner, service, host_id, "set1")
        caller = gateway_for(service, http, host_id, "bench-caller", CALLER_ROLES)
        numbers = iter(range(10**9))

        async def one() -> None:
            reply = await caller.call("workflow_invoke", tool.invoke_args(next(numbers)))
            if reply.outcome != "OK":
                raise RuntimeError(f"invoke failed: {reply.outcome} {reply.body}")

        for _ in range(WARMUP_CALLS):
            await one()
        server, postgres = service.server_cpu(), service.postgres_cpu()
        await asyncio.sleep(IDLE_S)
        idle_rate = (service.server_cpu() - server) / IDLE_S
        print(
            f"idle: service CPU {idle_rate * 1000:.1f} ms/s,"
            f" PostgreSQL CPU {(service.postgres_cpu() - postgres) * 1000 / IDLE_S:.1f} ms/s",
            flush=True,
        )
        # The profile starts after publishing and warm-up: only the steady state is read.
        spy = _pyspy(service.server.pid, pyspy) if pyspy else None
        if cprofile:
            service.server.send_signal(signal.SIGUSR1)
        for _ in range(rounds):
            await asyncio.sleep(0.5)
            split = _user_system(service.server.pid)
            server, postgres, began = service.server_cpu(), service.postgres_cpu(), time.time()
            for _ in range(calls):
                await one()
            elapsed = time.time() - began
            lines.append(_line("sequential", calls, elapsed, service, server, postgres))
            user, system = (
                (after - before) * 1000 / calls
                for after, before in zip(_user_system(service.server.pid), split, strict=True)
            )
            net = (service.server_cpu() - server - idle_rate * elapsed) * 1000 / calls
            lines[-1] += f" (user {user:.2f}, system {system:.2f}; net of idle {net:.2f})"
            if statements is not None:
                lines[-1] += "; " + await statements.per_call(one, calls)
            if concurrent:
                await asyncio.sleep(0.5)
                server, postgres, began = service.server_cpu(), service.postgres_cpu(), time.time()
                per = calls // concurrent

                async def loop(count: int) -> None:
                    for _ in range(count):
                        await one()

                await asyncio.gather(*(loop(per) for _ in range(concurrent)))
                elapsed = time.time() - began
                name = f"c={concurrent}"
                lines.append(_line(name, per * concurrent, elapsed, service, server, postgres))
            print(lines[-1] if not concurrent else "\n".join(lines[-2:]), flush=True)
        if cprofile:
            service.server.send_signal(signal.SIGUSR2)
            await asyncio.sleep(2.0)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
    return lines


class StatementLog:
    """Counts the statements PostgreSQL logs (log_min_duration_statement = 0) in a window."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url

    def _set(self, value: str) -> Path:
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET log_min_duration_statement = {value}")
            conn.execute("SELECT pg_reload_conf()")
            row = conn.execute("SELECT current_setting('data_directory')").fetchone()
        assert row is not None
        return Path(row[0]) / "postmaster.log"

    def _count(self, log: Path, start: int) -> int:
        with log.open("rb") as handle:
            handle.seek(start)
            return handle.read().count(b" duration: ")

    async def per_call(self, one: Callable[[], Awaitable[None]], calls: int) -> str:
        """Statements per call of `calls` sequential calls, net of an idle window as long."""
        log = self._set("0")
        try:
            await asyncio.sleep(0.5)
            start, began = log.stat().st_size, time.time()
            for _ in range(calls):
                await one()
            elapsed = time.time() - began
            busy = self._count(log, start)
            start = log.stat().st_size
            await asyncio.sleep(elapsed)
            idle = self._count(log, start)
        finally:
            self._set("-1")
        return f"statements {(busy - idle) / calls:.2f}/call (idle window {idle})"


def _user_system(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def _line(
    name: str, calls: int, elapsed: float, service: Service, server: float, postgres: float
) -> str:
    server_ms = (service.server_cpu() - server) * 1000 / calls
    postgres_ms = (service.postgres_cpu() - postgres) * 1000 / calls
    return (
        f"{name:10s} {calls} calls in {elapsed:.2f} s ({elapsed * 1000 / calls:.2f} ms/call):"
        f" service CPU {server_ms:.2f} ms/call, PostgreSQL CPU {postgres_ms:.2f} ms/call"
    )


def _pyspy(pid: int, out: str) -> subprocess.Popen[bytes]:
    binary = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    argv = [binary, "record", "--pid", str(pid), "--format", "raw", "--output", out]
    argv += ["--rate", "200"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _serve_under_cprofile(out: str) -> None:
    """Make the harness start the server under bench.cprofile_serve (signal-toggled)."""
    _serve_under("bench.cprofile_serve", {"WORKFLOW_CPROFILE_OUT": out})


def _serve_under(module: str, extra_env: dict[str, str]) -> None:
    spawn = harness._spawn

    def wrapped(argv: list[str], env: dict[str, str], log: Path) -> Any:
        if argv[1:3] == ["-m", "runtime.cli"]:
            argv = [argv[0], "-m", module, *argv[3:]]
            env = dict(env, **extra_env)
        return spawn(argv, env, log)

    harness._spawn = wrapped


def main(argv: list[str] | None = None) -> int:
    """Run the profile; 0 when it completed."""
    parser = argparse.ArgumentParser(prog="bench.profile_invoke")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrent", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--fast", action="store_true", help="embedded PostgreSQL without fsync")
    parser.add_argument("--pyspy", default=None, help="record the server into this raw file")
    parser.add_argument("--cprofile", default=None, help="cProfile (CPU clock) stats file")
    parser.add_argument(
        "--statements", action="store_true", help="count SQL statements per sequential call"
    )
    args = parser.parse_args(argv)
    extra: dict[str, Any] = {}
    if args.statements:
        # The idle window is subtracted from the busy one: the capacity sampler must read at
        # one rate in both, not back off while idle (capacity.idle_sample_interval_ms).
        extra["capacity"] = {"idle_sample_interval_ms": 50}
    if args.cprofile:
        _serve_under_cprofile(os.path.abspath(args.cprofile))
    elif os.environ.get("AB_LOOP"):
        _serve_under("bench.serve_variant", {})
    with (
        database(args.fast) as (url, postmaster_pid),
        running_service(url, postmaster_pid, extra) as service,
    ):
        statements = StatementLog(url) if args.statements else None
        asyncio.run(
            _load(
                service,
                args.calls,
                args.concurrent,
                args.rounds,
                args.pyspy,
                args.cprofile,
                statements,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
