"""Benchmark (not a test): the service's CPU per workflow_invoke in each protocol era, A/B.

    .venv/bin/python -m bench.eras layer [--calls 20000] [--rounds 9]
    .venv/bin/python -m bench.eras served [--calls 1000] [--rounds 6] [--closed 50]
                                          [--seconds 4] [--fast]

The same `tools/call workflow_invoke` in its two request forms:

- modern: 2026-07-28, as bench-peers' ours-direct sends it (`MCP-Protocol-Version`,
  `Mcp-Method`, `Mcp-Name`, the era's `params._meta`);
- legacy: 2025-11-25, exactly as the Gateway sends it (no `_meta`, no `Mcp-*` headers).

`layer`: in this process, no database and no server: what `serve` runs for one POST /mcp once
uvicorn has read it (`FrontDoor.answer_on_arrival`, then `FrontDoor` and litestar's
`POST /mcp` down to `McpServer` and the reply's encoding) over a tool that answers at once
with workflow_invoke's result, timed with `time.process_time` over `--calls` calls per form and
round, the forms alternating which goes first. Only the era's own work differs between the
forms, so the difference is its cost without the noise of the rest of a call.

`served`: the real server (`bench.harness`) with bench-peers' published `decide` Tool. The
server's CPU is read from `/proc/<pid>/task/*/schedstat` (nanoseconds; `/proc/<pid>/stat`
counts 10 ms ticks). Sequential: `--calls` rounds of one call per form, order alternating,
each call's CPU paired with the other form's of its round. Closed: `--rounds` rounds of a
closed loop of `--closed` callers for `--seconds` per form, order alternating: server CPU per
OK call, the median per form and the median of the rounds' modern/legacy ratios. Phases run
minutes apart compare the machine's drift as much as the forms: only interleaved figures say
what a form costs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec

from bench.gateway_overhead import legacy
from bench.harness import cpu_seconds, database, new_id, running_service
from bench.peers import driver
from bench.peers.driver import Caller, Target
from bench.peers.run import direct_callers, publish, user_tokens
from runtime.admission import Admission
from runtime.composition.front_door import FrontDoor
from runtime.mcp.app import create_app
from runtime.mcp.dispatch import ToolOutcome
from runtime.mcp.server import McpServer
from runtime.settings import Settings

FORMS = ("modern", "legacy")
WARMUP_CALLS = 50


@dataclass(frozen=True)
class Paired:
    """Differences of paired measurements (a - b): their mean, median and standard error."""

    n: int
    mean: float
    median: float
    standard_error: float


def paired(a: list[float], b: list[float]) -> Paired:
    """a[i] - b[i] summarized; the standard error is 0 with fewer than two pairs."""
    differences = [x - y for x, y in zip(a, b, strict=True)]
    if not differences:
        return Paired(0, 0.0, 0.0, 0.0)
    spread = statistics.stdev(differences) if len(differences) > 1 else 0.0
    return Paired(
        len(differences),
        statistics.fmean(differences),
        statistics.median(differences),
        spread / len(differences) ** 0.5,
    )


def schedstat_ns(text: str) -> int:
    """The time on CPU (ns) in one /proc/<pid>/task/<tid>/schedstat line."""
    return int(text.split()[0])


def server_cpu_ns(pid: int) -> int:
    """Nanoseconds on CPU of every live thread of pid (its /proc stat ticks when unreadable)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            total += schedstat_ns((task / "schedstat").read_text())
        except (OSError, ValueError, IndexError):
            continue
    return total or int(cpu_seconds(pid) * 1e9)


def order(round_no: int) -> tuple[str, str]:
    """The forms in round round_no's order: each goes first every other round."""
    return FORMS if round_no % 2 == 0 else (FORMS[1], FORMS[0])


def forms_of(caller: Caller) -> dict[str, Caller]:
    """A 2026-07-28 workflow_invoke Caller and the same call in the 2025-11-25 form."""
    return {"modern": caller, "legacy": legacy(caller)}


# --- layer: the MCP layer in this process ----------------------------------------------------

# workflow_invoke's result as the decide Tool answers it (the contract's output shape).
_STRUCTURED = {
    "status": "completed",
    "workflowInstanceId": "0198a4f0-1d2e-7a3b-8c4d-5e6f7a8b9c0d",
    "definitionDigest": "sha256:" + "3b08" * 16,
    "output": {"decision": "approve", "requestId": "bench-1"},
}


class _AnsweringTool:
    """tools/call answered at once with one prebuilt outcome (a ToolCalls)."""

    def __init__(self) -> None:
        self.outcome = ToolOutcome(_STRUCTURED, False, msgspec.json.encode(_STRUCTURED).decode())

    async def call(self, name: Any, arguments: Any, headers: Mapping[str, str]) -> ToolOutcome:
        """The prebuilt outcome, whatever the call."""
        return self.outcome


class _NoPages:
    def page(self, cursor: Any, size: int) -> tuple[list[dict[str, Any]], str | None]:
        return [], None


def layer_app() -> FrontDoor:
    """The service's ASGI app behind its front door, as serve runs it, over a tool that
    answers at once (no services: POST /mcp reads only the server settings and the server)."""
    app = create_app()
    app.state.services = SimpleNamespace(settings=Settings())
    app.state.mcp_server = McpServer(_NoPages(), _AnsweringTool())
    return FrontDoor(app, Admission())


def _layer_call(app: FrontDoor, caller: Caller, body: bytes) -> Callable[[], Awaitable[bytes]]:
    """One POST /mcp as serve takes it: answer_on_arrival on the body, then the ASGI app."""
    sent_headers = {**caller.headers, "Host": "127.0.0.1", "Content-Length": str(len(body))}
    raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in
           sent_headers.items()]  # fmt: skip

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def once() -> bytes:
        scope: dict[str, Any] = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": "/mcp", "raw_path": b"/mcp",
            "root_path": "", "query_string": b"", "headers": raw,
            "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 50000),
        }  # fmt: skip
        if app.answer_on_arrival(scope, body) is not None:
            raise RuntimeError("the door refused a call in the layer bench")
        sent: list[MutableMapping[str, Any]] = []

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        await app(scope, receive, send)
        answer = b"".join(message.get("body", b"") for message in sent)
        if sent[0]["status"] != 200 or b'"result"' not in answer:
            raise RuntimeError(f"unexpected answer in the layer bench: {answer[:300]!r}")
        return answer

    return once


def layer(calls: int, rounds: int) -> dict[str, list[float]]:
    """Microseconds of CPU per call of each form, one figure per round."""
    return asyncio.run(_layer(calls, rounds))


async def _layer(calls: int, rounds: int) -> dict[str, list[float]]:
    app = layer_app()
    auth = {"Authorization": "Bearer " + "u" * 900, "X-Scope-Token": "a" * 700}
    caller = driver.tool_call_caller(
        "workflow_invoke",
        auth,
        lambda decide_input: {
            "stableToolRef": "0198a3b7-0c4d-7e21-9f6a-3d5c8b1e2a47",
            "expectedBindingDigest": "sha256:" + "07cd" * 16,
            "expectedDefinitionDigest": "sha256:" + "3b08" * 16,
            "input": decide_input,
        },
    )
    once = {
        name: _layer_call(app, form, form.body(700, "bench-1"))
        for name, form in forms_of(caller).items()
    }
    for call in once.values():
        for _ in range(WARMUP_CALLS):
            await call()
    spent: dict[str, list[float]] = {name: [] for name in FORMS}
    for round_no in range(rounds):
        for name in order(round_no):
            call = once[name]
            began = time.process_time()
            for _ in range(calls):
                await call()
            spent[name].append((time.process_time() - began) * 1e6 / calls)
    return spent


def print_layer(spent: dict[str, list[float]]) -> None:
    """Per form: min and median us per call; the modern - legacy difference."""
    for name in FORMS:
        values = spent[name]
        print(f"{name:7s} min {min(values):6.2f}  median {statistics.median(values):6.2f} us/call")
    difference = paired(spent["modern"], spent["legacy"])
    print(
        f"modern - legacy: median {difference.median:+.2f} us/call "
        f"(mean {difference.mean:+.2f}, se {difference.standard_error:.2f}, {difference.n} rounds)"
    )


# --- served: the real server -----------------------------------------------------------------


async def sequential(targets: dict[str, Target], pid: int, calls: int) -> dict[str, list[float]]:
    """ms of server CPU of each OK call per form, rounds of one call each (order alternating)."""
    spent: dict[str, list[float]] = {name: [] for name in FORMS}
    connections = {name: target.connection() for name, target in targets.items()}
    prefixes = {name: target.phase_prefix() for name, target in targets.items()}
    try:
        for n in range(WARMUP_CALLS + calls):
            round_cpu: dict[str, float | None] = {}
            for name in order(n):
                before = server_cpu_ns(pid)
                sample = await driver.one_call(
                    connections[name], targets[name], prefixes[name], n, 0.0
                )
                after = server_cpu_ns(pid)
                round_cpu[name] = (after - before) / 1e6 if sample.outcome == "OK" else None
            if n >= WARMUP_CALLS and None not in round_cpu.values():
                for name, value in round_cpu.items():
                    assert value is not None
                    spent[name].append(value)
    finally:
        for connection in connections.values():
            connection.close()
    return spent


@dataclass(frozen=True)
class Loop:
    """One closed loop of one form: its calls, OK calls and the server's CPU."""

    form: str
    calls: int
    ok: int
    cpu_ms: float

    @property
    def ms_per_ok(self) -> float:
        """Server CPU per OK call (ms); inf when none was OK."""
        return self.cpu_ms / self.ok if self.ok else float("inf")


def closed_ratios(loops: list[Loop]) -> list[float]:
    """Each round's modern / legacy CPU per OK call (loops in run order, two per round)."""
    ratios = []
    for first, second in zip(loops[::2], loops[1::2], strict=True):
        by_form = {first.form: first, second.form: second}
        ratios.append(by_form["modern"].ms_per_ok / by_form["legacy"].ms_per_ok)
    return ratios


def closed(
    targets: dict[str, Target], pid: int, callers: int, seconds: float, rounds: int
) -> list[Loop]:
    """rounds rounds of one closed loop per form (order alternating), in run order."""
    loops = []
    for round_no in range(rounds):
        for name in order(round_no):
            time.sleep(1.0)  # the last loop's stragglers and commits settle
            before = server_cpu_ns(pid)
            samples = asyncio.run(driver.closed_loop(targets[name], callers, seconds))
            cpu_ms = (server_cpu_ns(pid) - before) / 1e6
            ok = sum(1 for sample in samples if sample.outcome == "OK")
            loops.append(Loop(name, len(samples), ok, cpu_ms))
            print(
                f"closed c={callers} round {round_no + 1} {name:7s} {len(samples):5d} calls "
                f"{ok:5d} ok  server CPU {loops[-1].ms_per_ok:.3f} ms/OK",
                flush=True,
            )
    return loops


def served(calls: int, rounds: int, callers: int, seconds: float, fast: bool) -> None:
    """Start the stack, publish the decide Tool, run both comparisons, print them."""
    with ExitStack() as stack:
        url, postmaster = stack.enter_context(database(fast))
        service = stack.enter_context(running_service(url, postmaster, {}))
        tools = asyncio.run(publish(service, new_id(), ["decide"]))
        auths = user_tokens(service, tools["decide"].host_id)
        run_id = new_id()[:8]
        callers_of: dict[str, list[Caller]] = {name: [] for name in FORMS}
        for caller in direct_callers([tools["decide"]], auths):
            for name, form in forms_of(caller).items():
                callers_of[name].append(form)
        targets = {name: Target(name, service.mcp_url, callers_of[name], run_id) for name in FORMS}
        pid = service.server.pid
        if calls:
            spent = asyncio.run(sequential(targets, pid, calls))
            for name in FORMS:
                values = spent[name]
                print(
                    f"sequential {name:7s} n={len(values)} mean {statistics.fmean(values):.3f} "
                    f"median {statistics.median(values):.3f} ms/call",
                    flush=True,
                )
            difference = paired(spent["modern"], spent["legacy"])
            print(
                f"sequential modern - legacy: mean {difference.mean * 1000:+.1f} us/call "
                f"(se {difference.standard_error * 1000:.1f}), median "
                f"{difference.median * 1000:+.1f} us/call",
                flush=True,
            )
        if rounds:
            loops = closed(targets, pid, callers, seconds, rounds)
            for name in FORMS:
                per_ok = [loop.ms_per_ok for loop in loops if loop.form == name]
                print(f"closed {name:7s} median {statistics.median(per_ok):.3f} ms/OK")
            ratios = closed_ratios(loops)
            print(
                f"closed modern / legacy per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
                f"median {statistics.median(ratios):.3f}"
            )


def main(argv: list[str] | None = None) -> int:
    """Run the chosen comparison."""
    parser = argparse.ArgumentParser(prog="bench.eras")
    modes = parser.add_subparsers(dest="mode", required=True)
    in_process = modes.add_parser("layer", help="the MCP layer in this process (no database)")
    in_process.add_argument("--calls", type=int, default=20_000)
    in_process.add_argument("--rounds", type=int, default=9)
    real = modes.add_parser("served", help="the real server and PostgreSQL")
    real.add_argument("--calls", type=int, default=1000, help="sequential rounds (0: none)")
    real.add_argument("--rounds", type=int, default=6, help="closed-loop rounds (0: none)")
    real.add_argument("--closed", type=int, default=50, help="callers of each closed loop")
    real.add_argument("--seconds", type=float, default=4.0, help="length of each closed loop")
    real.add_argument("--fast", action="store_true", help="embedded PostgreSQL without fsync")
    args = parser.parse_args(argv)
    if args.mode == "layer":
        print_layer(layer(args.calls, args.rounds))
    else:
        served(args.calls, args.rounds, args.closed, args.seconds, args.fast)
    return 0


if __name__ == "__main__":
    sys.exit(main())
