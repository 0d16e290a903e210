"""Faults under load tell the truth (issue 42 item 7): `make fault-load`, run by CI.

50 callers call a write Tool through POST /mcp with real tokens; the Tool POSTs to a stub that
records every effect by requestId. Round one kills the service with SIGKILL and starts it
again; round two restarts PostgreSQL with `pg_ctl restart -m immediate` (this run's own
throwaway cluster). Every caller retries a call with the same idempotency key until it gets a
final answer (a result, or an error that is not retryable). Then:

- 0 effects lost: every run stored COMPLETED, and every call answered with a result, has
  exactly one effect at the stub; every effect belongs to a run;
- 0 doubled: no requestId reached the stub twice;
- 0 stuck: no run is live once the callers are done and the runs had time to end;
- no answer contradicts the stored effect state: a result is a COMPLETED run with its effect;
  a run failure never says "no effect" or "retryable" when the run's effect state is not
  none; an "unavailable" answer that names no run (it reads as "nothing was admitted") never
  came after the run of its key had been admitted;
- no unhandled task exception in the service's log.

The load generator is this process (asyncio and httpx, 50 callers), apart from the service
process and the stub process. Prints one JSON summary; exit 1 when a check fails.

    python -m bench.fault_load [--seconds 8] [--callers 50] [--out summary.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg.rows import dict_row

from bench.harness import REPO, Gateway, Service, free_port, gateway_for
from bench.workload import OWNER, publish_text_tool
from runtime.security.devtools import DevIdentity
from runtime.store import EmbeddedPostgres
from tests.support.binding_builders import EVIDENCE, POLICY_DIGEST

CALLERS = 50
# Where a failed run's logs are kept (made only once the checks failed).
KEEP_LOGS_IN = Path(tempfile.gettempdir()) / "fault-load-logs"
LOAD_SECONDS = 8.0
# A fault strikes this long into a round's load.
FAULT_AT_S = 3.0
# How long callers keep retrying once the load stops, and runs may take to end after that.
SETTLE_S = 30.0
DRAIN_S = 20.0
RETRY_PAUSE_S = 0.2
CALL_TIMEOUT_S = 15.0
CALLER_ROLES = ("admin", "workflow-admin")
# Lines that mean an exception nobody handled (asyncio's reports, a thread's or loop's crash).
UNHANDLED = (
    "exception was never retrieved",
    "Exception in callback",
    "Unhandled exception",
    "Exception in thread",
    "Task was destroyed but it is pending",
)
STUB = r"""
import asyncio, json, sys
counts = {}
async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = await reader.readexactly(length) if length else b""
            if head.startswith(b"POST"):
                rid = json.loads(body)["requestId"]
                counts[rid] = counts.get(rid, 0) + 1
                # A write takes a moment: a fault then finds some of them in flight.
                await asyncio.sleep(0.02)
                out = json.dumps({"requestId": rid, "recorded": counts[rid]}).encode()
            else:
                out = json.dumps(counts).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(out)).encode() + b"\r\n\r\n" + out)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]), backlog=512)
    async with server:
        await server.serve_forever()
asyncio.run(main())
"""


def definition(stub_url: str) -> str:
    """One write: POST {requestId} to the stub, with the owner's approval evidence."""
    return (
        'document:\n  dsl: "1.0.3"\n  namespace: fault\n  name: order\n  version: "1.0.0"\n'
        "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
        "      required: [requestId]\n"
        "      properties:\n        requestId:\n          type: string\n"
        "do:\n  - save:\n      call: http\n      with:\n        method: POST\n"
        f"        endpoint: {stub_url}/effects\n"
        "        body:\n          requestId: ${ .requestId }\n"
        f"      metadata:\n        approvalEvidenceDigest: {EVIDENCE}\n"
    )


@dataclass
class Answer:
    """One answer a caller got: when, what."""

    at: float
    outcome: str  # OK, an error code, or TRANSPORT
    retryable: bool = True
    after_effect: bool | None = None
    instance: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    final: bool = False


@dataclass
class Stack:
    """The cluster, the stub and the service (restartable), in one temp directory."""

    directory: Path
    cluster: EmbeddedPostgres
    identity: DevIdentity
    config: Path
    port: int
    stub_port: int
    env: dict[str, str]
    server: subprocess.Popen[bytes] | None = None
    stub: subprocess.Popen[bytes] | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def stub_url(self) -> str:
        return f"http://127.0.0.1:{self.stub_port}"

    def start_server(self) -> None:
        """Start the service (a new log file per life) and wait until it is ready."""
        log = self.directory / f"server-{len(self.logs)}.log"
        self.logs.append(log)
        argv = [sys.executable, "-m", "runtime.cli", "serve", "--config", str(self.config)]
        with log.open("wb") as out:
            self.server = subprocess.Popen(
                argv, cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"server exited:\n{log.read_text(errors='replace')[-3000:]}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.base_url}/readyz", timeout=2.0).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError("server not ready after 90 s")

    def kill_server(self) -> None:
        """SIGKILL: no cleanup, no lease release, exactly like a crashed host."""
        assert self.server is not None
        os.killpg(self.server.pid, signal.SIGKILL)
        self.server.wait()

    def stop(self) -> None:
        for process in (self.server, self.stub):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


def _config(directory: Path, identity: DevIdentity, port: int) -> Path:
    import msgspec
    import yaml

    config: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": port},
        "store": {"data_dir": str(directory / "data")},
        "security": msgspec.to_builtins(identity.settings()),
        "publication": {
            "destinations": {
                "allowed_schemes": ["http", "https"],
                "allowed_networks": ["127.0.0.0/8", "::1/128"],
            }
        },
        "execution": {"outbound": {"environment": "dev"}},
    }
    path = directory / "workflow.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=True), encoding="utf-8")
    return path


@contextlib.contextmanager
def running_stack() -> Iterator[Stack]:
    """A throwaway cluster, the effect stub and the service, stopped on exit."""
    directory = Path(tempfile.mkdtemp(prefix="wf-fault-load-"))
    directory.chmod(0o755)
    # Not the tests' fast cluster: its synchronous_commit=off acknowledges a COMMIT before its
    # WAL leaves shared memory, so an immediate restart loses commits the service was told
    # about (measured: a confirmed write's ledger row lost, its POST then sent again). A
    # restart kills processes, not the machine: WAL handed to the kernel survives it, so
    # fsync may stay off (as full_page_writes), but every commit must reach the kernel.
    cluster = EmbeddedPostgres(directory / "pg", database="faults", fast=False)
    stack: Stack | None = None
    try:
        url = cluster.start()
        with psycopg.connect(cluster.admin_url(), autocommit=True) as admin:
            admin.execute("ALTER SYSTEM SET fsync = off")
            admin.execute("ALTER SYSTEM SET full_page_writes = off")
            admin.execute("SELECT pg_reload_conf()")
        identity = DevIdentity(directory / "identity")
        port, stub_port = free_port(), free_port()
        env = dict(os.environ, DATABASE_URL=url, PYTHONUNBUFFERED="1")
        config = _config(directory, identity, port)
        env["WORKFLOW_CONFIG"] = str(config)
        stack = Stack(directory, cluster, identity, config, port, stub_port, env)
        stack.stub = subprocess.Popen(
            [sys.executable, "-c", STUB, str(stub_port)], env=env, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        stack.start_server()
        yield stack
    finally:
        if stack is not None:
            stack.stop()
        cluster.stop()
        if KEEP_LOGS_IN.exists():
            # A failed run keeps its evidence: the service's logs and PostgreSQL's.
            for log in [*directory.glob("server-*.log"), *directory.glob("pg/*.log")]:
                shutil.copy(log, KEEP_LOGS_IN / log.name)
        shutil.rmtree(directory, ignore_errors=True)


def _answer(status: int, body: Any) -> Answer:
    now = time.time()
    if status != 200 or not isinstance(body, dict) or "error" in body:
        return Answer(now, f"HTTP_{status}")
    result = body.get("result") or {}
    content = result.get("structuredContent") or {}
    if not result.get("isError"):
        return Answer(now, "OK", False, None, content.get("workflowInstanceId"), final=True)
    error = content.get("error") or {}
    retryable = bool(error.get("retryable"))
    return Answer(
        now,
        str(error.get("code")),
        retryable,
        bool(error.get("afterEffect")),
        content.get("workflowInstanceId"),
        error.get("details") or {},
        final=not retryable,
    )


@dataclass
class Load:
    """Every answer every requestId got, and when the calls stopped."""

    answers: dict[str, list[Answer]] = field(default_factory=dict)
    stop_new_at: float = 0.0
    give_up_at: float = 0.0


async def settle(gateway: Gateway, tool: Any, rid: str, load: Load) -> None:
    """Call with key rid until a final answer or the round ends (a caller obeying retryable)."""
    args = {
        "stableToolRef": tool.tool_id,
        "expectedBindingDigest": tool.binding_digest,
        "expectedDefinitionDigest": tool.definition_digest,
        "input": {"requestId": rid},
        "idempotencyKey": rid,
    }
    answers = load.answers.setdefault(rid, [])
    while time.monotonic() < load.give_up_at:
        try:
            reply = await gateway.request(
                "tools/call", {"name": "workflow_invoke", "arguments": args}, "workflow_invoke"
            )
            answer = _answer(200, reply.body) if reply.body else Answer(time.time(), reply.outcome)
            if reply.outcome.startswith(("HTTP_", "RPC_")):
                answer = Answer(time.time(), reply.outcome)
        except (httpx.TransportError, ValueError) as exc:
            answer = Answer(time.time(), f"TRANSPORT_{type(exc).__name__}")
        answers.append(answer)
        if answer.final:
            return
        await asyncio.sleep(RETRY_PAUSE_S)


async def caller(gateway: Gateway, tool: Any, prefix: str, load: Load) -> None:
    n = 0
    while time.monotonic() < load.stop_new_at:
        await settle(gateway, tool, f"{prefix}-{n}", load)
        n += 1


async def round_under_fault(
    stack: Stack, gateways: list[Gateway], tool: Any, name: str, seconds: float, load: Load
) -> dict[str, Any]:
    """Callers for `seconds`; the fault strikes at FAULT_AT_S; then same-key retries settle."""
    began = time.monotonic()
    load.stop_new_at = began + seconds
    load.give_up_at = load.stop_new_at + SETTLE_S
    callers = [
        asyncio.create_task(caller(gateway, tool, f"{name}-c{i}", load))
        for i, gateway in enumerate(gateways)
    ]
    await asyncio.sleep(FAULT_AT_S)
    struck = time.time()
    if name == "kill":
        stack.kill_server()
        await asyncio.to_thread(stack.start_server)
    else:
        await asyncio.to_thread(stack.cluster.restart, "immediate")
    back = time.time()
    await asyncio.gather(*callers)
    # Recovery: from the fault to the first result answered after it.
    firsts = [
        a.at
        for rid, answers in load.answers.items()
        if rid.startswith(name)
        for a in answers
        if a.outcome == "OK" and a.at > back
    ]
    return {
        "round": name,
        "faultRestartS": round(back - struck, 2),
        "recoveryS": round(min(firsts) - struck, 2) if firsts else None,
        "calls": sum(1 for rid in load.answers if rid.startswith(name)),
        "seconds": round(time.monotonic() - began, 1),
    }


def stored_runs(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every run by the requestId of its input (oldest first): state, effect state, error."""
    query = (
        "SELECT DISTINCT ON (p.process_id) p.process_id::text AS id, p.state, p.effect_state,"
        " p.error, extract(epoch FROM p.created_ts)::float AS created,"
        " t.payload->'input'->>'requestId' AS rid"
        " FROM workflow_process p JOIN workflow_task t"
        " ON t.host_id = p.host_id AND t.process_id = p.process_id AND t.payload ? 'input'"
        " ORDER BY p.process_id, t.step_no"
    )
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(query).fetchall()
    runs: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["created"]):
        runs.setdefault(row["rid"], []).append(dict(row))
    return runs


def live_runs(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM workflow_process WHERE state IN ('ACCEPTED','RUNNING','WAITING')"
        ).fetchone()
    return int(row[0]) if row else 0


def verdict(
    load: Load, effects: dict[str, int], runs: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """The checks of the module docstring; each list names the requestIds that fail it.

    A key may hold a second run only after a first that ended with no effect (seed 000: a
    clean failure can be retried at once); two runs of one key with an effect fail.
    """
    doubled = sorted(rid for rid, n in effects.items() if n > 1)
    lost: list[str] = []
    contradicted: list[str] = []
    unsettled: list[str] = []
    for rid, key_runs in runs.items():
        count = effects.get(rid, 0)
        with_effect = [run for run in key_runs if run["effect_state"] != "none"]
        if len(with_effect) > 1:
            doubled.append(f"{rid}: {len(with_effect)} runs with an effect")
        for run in key_runs:
            if run["state"] == "COMPLETED" and count != 1:
                lost.append(rid)
            if run["effect_state"] == "confirmed" and count == 0:
                lost.append(rid)
            error = run["error"] or {}
            if (
                run["effect_state"] != "none"
                and error
                and (error.get("retryable") or not error.get("afterEffect"))
            ):
                contradicted.append(
                    f"{rid}: stored {error.get('code')} vs effect {run['effect_state']}"
                )
    orphans = sorted(rid for rid in effects if rid not in runs)
    for rid, answers in load.answers.items():
        key_runs = runs.get(rid, [])
        by_id = {run["id"]: run for run in key_runs}
        if not answers or not answers[-1].final:
            unsettled.append(rid)
        for answer in answers:
            # The run the answer names, else the key's run admitted before the answer.
            before = [run for run in key_runs if run["created"] <= answer.at]
            stored = by_id.get(answer.instance or "") or (before[-1] if before else None)
            problem = _contradiction(answer, stored, effects.get(rid, 0))
            if problem:
                contradicted.append(f"{rid}: {problem}")
    return {
        "doubled": sorted(doubled),
        "secondRuns": sorted(rid for rid, key_runs in runs.items() if len(key_runs) > 1),
        "lost": sorted(set(lost)),
        "effectsWithoutRun": orphans,
        # Each contradiction once (a caller that obeys retryable repeats the same answer).
        "contradicted": sorted(set(contradicted)),
        "unsettledCalls": sorted(unsettled),
    }


def _contradiction(answer: Answer, run: dict[str, Any] | None, count: int) -> str | None:
    if answer.outcome == "OK":
        if run is None or run["state"] != "COMPLETED" or count != 1:
            return f"answered a result, stored {run and run['state']} with {count} effects"
        return None
    if answer.outcome.startswith(("TRANSPORT", "HTTP_", "RPC_")):
        return None  # no answer from the service (it was down): nothing claimed
    if answer.outcome in ("WORKFLOW_CAPACITY_EXHAUSTED", "WORKFLOW_OPERATION_PENDING"):
        return None
    if answer.outcome == "WORKFLOW_TIMEOUT" and answer.retryable:
        return None  # still running: re-attach
    if answer.outcome == "WORKFLOW_INVOCATION_UNAVAILABLE":
        unknown = "unknown" in (answer.details.get("admission"), answer.details.get("runState"))
        if unknown:
            return None  # says what it does not know, and names the run and the key
        if answer.instance is None:
            # Reads as "nothing was admitted": false once the key's run exists.
            if run is not None and run["created"] < answer.at - 0.05:
                return "answered unavailable naming no run after its run was admitted"
            return None
    # A run's own end (an unavailable one too: a stored error): it must agree with the run.
    if run is None:
        return f"answered {answer.outcome} for no stored run"
    effect = run["effect_state"] != "none"
    if answer.after_effect is not effect:
        return f"answered afterEffect {answer.after_effect}, stored effect {run['effect_state']}"
    if effect and answer.retryable:
        return f"answered retryable {answer.outcome} after effect {run['effect_state']}"
    return None


def unhandled_lines(logs: list[Path]) -> list[str]:
    found: list[str] = []
    for log in logs:
        with contextlib.suppress(OSError):
            for line in log.read_text(errors="replace").splitlines():
                if any(marker in line for marker in UNHANDLED):
                    found.append(f"{log.name}: {line[:300]}")
    return found


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with running_stack() as stack:
        limits = httpx.Limits(
            max_connections=args.callers + 10, max_keepalive_connections=args.callers + 10
        )
        async with httpx.AsyncClient(timeout=CALL_TIMEOUT_S, limits=limits) as http:
            service = Service(
                stack.base_url, stack.cluster.url(), stack.identity, stack.server,  # type: ignore[arg-type]
                None, stack.stub_url, stack.logs[0],
            )  # fmt: skip
            host_id = "00000000-0000-4000-8000-0000000000fa"
            owner = gateway_for(service, http, host_id, OWNER, CALLER_ROLES)
            target = {
                "endpointRef": "stub",
                "endpointUri": f"{stack.stub_url}/effects",
                "allowedMethods": ["POST"],
                "environments": ["dev"],
                "authorizationPolicyDigest": POLICY_DIGEST,
            }
            unlimited = 1_000_000
            tool = await publish_text_tool(
                owner, host_id, "order", definition(stack.stub_url), [target],
                toolAnnotations={"readOnly": False, "destructive": False},
                idempotencyPolicy={"kind": "explicit", "resultReplayMs": 600000},
                admissionLimits={
                    "maximumConcurrentRuns": unlimited, "maximumConcurrentRunsPerUser": unlimited,
                    "startsPerMinute": unlimited, "startsPerMinutePerUser": unlimited,
                },
            )  # fmt: skip
            gateways = [
                gateway_for(service, http, host_id, f"caller-{i}", CALLER_ROLES)
                for i in range(args.callers)
            ]
            load = Load()
            rounds = [
                await round_under_fault(stack, gateways, tool, "kill", args.seconds, load),
                await round_under_fault(stack, gateways, tool, "pgrestart", args.seconds, load),
            ]
        url = stack.cluster.url()
        deadline = time.monotonic() + DRAIN_S
        while live_runs(url) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        stuck = live_runs(url)
        effects = httpx.get(f"{stack.stub_url}/effects", timeout=5).json()
        runs = stored_runs(url)
        checks = verdict(load, effects, runs)
        checks["stuck"] = stuck
        checks["unhandled"] = unhandled_lines(stack.logs)
        outcomes = Counter(a.outcome for answers in load.answers.values() for a in answers)
        summary = {
            "callers": args.callers,
            "rounds": rounds,
            "calls": len(load.answers),
            "effects": sum(effects.values()),
            "runs": sum(len(key_runs) for key_runs in runs.values()),
            "runStates": dict(
                Counter(
                    f"{r['rid'].split('-')[0]} {r['state']}/{r['effect_state']}"
                    for key_runs in runs.values()
                    for r in key_runs
                )
            ),
            "answers": dict(outcomes),
            "checks": checks,
        }
        if failed(summary):
            KEEP_LOGS_IN.mkdir(exist_ok=True)
            summary["evidence"] = evidence(url, checks, load)
            summary["logsKeptIn"] = str(KEEP_LOGS_IN)
        return summary


def evidence(url: str, checks: dict[str, Any], load: Load) -> dict[str, Any]:
    """The stored tasks and ledger steps, and the answers, of the requestIds a check names."""
    named = {
        item.split(":")[0] for name in ("doubled", "lost", "contradicted") for item in checks[name]
    }
    found: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        for rid in sorted(named)[:5]:
            rows = conn.execute(
                "SELECT t.step_no, t.state, t.attempts, t.error, s.step_no AS ledger_step,"
                " s.effect_state FROM workflow_task t LEFT JOIN workflow_step s"
                " ON s.host_id = t.host_id AND s.process_id = t.process_id"
                " WHERE t.process_id IN (SELECT process_id FROM workflow_task"
                "  WHERE payload->'input'->>'requestId' = %s)",
                (rid,),
            ).fetchall()
            answers = [vars(a) for a in load.answers.get(rid, [])]
            found[rid] = {"tasks": [dict(r) for r in rows], "answers": answers}
    return found


def failed(summary: dict[str, Any]) -> bool:
    checks = summary["checks"]
    return bool(checks["stuck"]) or any(
        checks[name]
        for name in (
            "doubled", "lost", "effectsWithoutRun", "contradicted",
            "unsettledCalls", "unhandled",
        )
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=LOAD_SECONDS, help="load per round")
    parser.add_argument("--callers", type=int, default=CALLERS)
    parser.add_argument("--out", default=None, help="write the summary as JSON here")
    args = parser.parse_args(argv)
    shutil.rmtree(KEEP_LOGS_IN, ignore_errors=True)
    began = time.monotonic()
    summary = asyncio.run(run(args))
    summary["totalS"] = round(time.monotonic() - began, 1)
    text = json.dumps(summary, indent=2, sort_keys=True, default=str)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    if failed(summary):
        print("fault-load: FAILED", file=sys.stderr)
        return 1
    print("fault-load: ok", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
