"""bench-peers' wrk phases: an external load generator on the one `decide` Tool.

The driver of bench/peers/driver.py is Python on the cores it measures; Debian's wrk 4.1 is C,
as a team measuring the service from outside would use. One wrk thread keeps c connections
busy with keep-alive POSTs of one tools/call (bench/peers/wrk_invoke.lua), every answer
classified, with one of two clients:

- resend: a call refused with WORKFLOW_CAPACITY_EXHAUSTED is sent again at once, the same
  arguments and requestId (the impatient agent of the closed loops);
- fresh: every request is a new call with a new requestId, refused or not (a client that
  gives up a refused call and asks something else).

This module builds what the script sends (heads and body slices, written as a Lua config
file), runs wrk and reads the JSON summary the script's done() writes; report.wrk_targets
judges issue 41's targets over the phases. It installs wrk when it is missing and this is root
(ensure_wrk).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import MODERN
from bench.peers import driver
from runtime.mcp.protocol import LEGACY_VERSION

SCRIPT = Path(__file__).with_name("wrk_invoke.lua")
POLICIES = ("resend", "fresh")
ERAS = (MODERN, LEGACY_VERSION)
# The concurrency whose goodput the overloaded ones are judged against (report.wrk_targets),
# and where both eras run and are compared.
BASE_CALLERS = 50
# wrk runs -d whole seconds, then stops at its next 100 ms tick; this bounds the rest.
GRACE_S = 30.0
_ID, _SCORE, _RID = "\u0001id\u0001", "\u0001score\u0001", "\u0001rid\u0001"


def ensure_wrk() -> str:
    """The path of wrk; installed from Debian's archive when missing and this is root."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() != 0:
        raise RuntimeError(
            "wrk is missing: install Debian's wrk 4.1 (`sudo apt-get install wrk`), run the "
            "benchmark as root (it installs wrk itself), or leave the wrk phases out with "
            "--only one-tool --only 8-tools"
        )
    print("installing wrk (apt-get install wrk)", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "wrk"]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}")
    found = shutil.which("wrk")
    if not found:
        raise RuntimeError("apt-get installed wrk but it is not on PATH")
    return found


def version(wrk: str) -> str:
    """`wrk -v`'s first words, e.g. "wrk debian/4.1.0-3+b2 [epoll]"."""
    done = subprocess.run([wrk, "-v"], capture_output=True, text=True, check=False)
    return done.stdout.split(" Copyright")[0].strip() or "unknown"


@dataclass(frozen=True)
class Request:
    """What the Lua script sends: one request head per user and the body's four slices.

    Request k of call n for user u is heads[u] + Content-Length + body[0] + "wrk-<k>" +
    body[1] + creditScore + body[2] + requestId + body[3] (render).
    """

    heads: tuple[str, ...]
    body: tuple[str, str, str, str]

    def render(self, user: int, k: int, score: int, request_id: str) -> str:
        """Request k as the script writes it (the tests read it back)."""
        one, two, three, four = self.body
        payload = f"{one}{k}{two}{score}{three}{request_id}{four}"
        return f"{self.heads[user]}Content-Length: {len(payload.encode())}\r\n\r\n{payload}"


def request(
    url: str,
    tool: str,
    auths: list[dict[str, str]],
    era: str = MODERN,
    wrap: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Request:
    """tools/call `tool` to url in era, one head per auth; wrap makes the tool's arguments.

    The same call as driver.tool_call_caller's in the 2026-07-28 era (its headers and _meta);
    in 2025-11-25 without the Mcp-Method/Mcp-Name headers and _meta, as the Gateway sends it.
    The JSON-RPC id is the script's own per request ("wrk-<k>"), so it can find the request
    an answer is for.
    """
    decide_input: dict[str, Any] = {"creditScore": _SCORE, "requestId": _RID}
    arguments = wrap(decide_input) if wrap else decide_input
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    headers["MCP-Protocol-Version"] = era
    if era == MODERN:
        params["_meta"] = driver.META
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": tool}
    message = {"jsonrpc": "2.0", "id": _ID, "method": "tools/call", "params": params}
    text = json.dumps(message, separators=(",", ":"))
    # json.dumps escapes the markers' control characters: split on the escaped spelling. The
    # id and requestId keep their quotes (strings); the score loses them (a number).
    one, rest = text.split(json.dumps(_ID)[1:-1], 1)
    two, rest = rest.split(json.dumps(_SCORE), 1)
    three, four = rest.split(json.dumps(_RID)[1:-1], 1)
    heads = tuple(driver.request_head(url, headers | auth)[2].decode("latin-1") for auth in auths)
    return Request(heads, (one + "wrk-", two, three, four))


def lua_string(text: str) -> str:
    """text as a Lua string literal: printable ASCII as is, every other byte as \\ddd."""
    out = []
    for byte in text.encode():
        out.append(chr(byte) if 32 <= byte < 127 and byte not in (34, 92) else f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def config_lua(policy: str, sent: Request, prefix: str, out: Path) -> str:
    """The script's config file (see bench/peers/wrk_invoke.lua)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")
    heads = ", ".join(lua_string(head) for head in sent.heads)
    body = ", ".join(lua_string(part) for part in sent.body)
    return (
        "return {\n"
        f"  policy = {lua_string(policy)},\n"
        f"  prefix = {lua_string(prefix)},\n"
        f"  out = {lua_string(str(out))},\n"
        f"  heads = {{ {heads} }},\n"
        f"  body = {{ {body} }},\n"
        "}\n"
    )


def command(wrk: str, url: str, callers: int, seconds: int, config: Path) -> list[str]:
    """One wrk thread, `callers` connections for `seconds` (whole seconds: wrk's -d)."""
    timeout = f"{round(driver.CALL_TIMEOUT_S)}s"
    return [
        wrk, "-t1", f"-c{callers}", f"-d{seconds}s", "--timeout", timeout, "-s", str(SCRIPT),
        url, "--", str(config),
    ]  # fmt: skip


REQUIRED = {
    "durationUs": int,
    "errors": dict,
    "sent": int,
    "answered": int,
    "resent": int,
    "unmatched": int,
    "retryAfter": int,
    "outcomes": dict,
    "examples": dict,
    "okUs": list,
    "refusedUs": list,
    "inFlightUs": list,
}


def parse_summary(text: str) -> dict[str, Any]:
    """The JSON the script's done() writes, its fields checked (ValueError when one is off)."""
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("the wrk summary is not a JSON object")
    for name, kind in REQUIRED.items():
        if not isinstance(raw.get(name), kind):
            raise ValueError(f"the wrk summary's {name} is not a {kind.__name__}")
    if raw["durationUs"] <= 0:
        raise ValueError("the wrk summary's durationUs is not positive")
    return raw


def summarize(raw: dict[str, Any], window: float) -> dict[str, Any]:
    """A phase summary in driver.summarize's shape (what report.print_phase prints), plus wrk's.

    Goodput is OK answers over wrk's run time: wrk stops at the end of -d and drops the calls in
    flight then (`unanswered`, with the ones a transport error lost), so nothing drains after
    the window. Those still in flight are timed by the age they had reached (`inFlight`), and
    `admittedOrWaiting` counts them with the OK answers: a wait longer than what is left of a
    short phase shows there instead of dropping out of the admitted latencies. A request lost
    to a transport error, or answered by a page naming no request, is counted in flight too
    (the script cannot tell them apart): `inFlightExact` is false then. Transport errors are
    wrk's socket errors (a lost request has no answer to classify); `timeouts` counts answers
    that took longer than --timeout (classified as well).
    """
    outcomes = Counter(raw["outcomes"])
    elapsed = raw["durationUs"] / 1e6
    rate = round(outcomes.get("OK", 0) / elapsed, 1)
    errors = raw["errors"]
    names = {"connect": "ConnectError", "read": "ReadError", "write": "WriteError"}
    transport = {f"TRANSPORT_{name}": errors[key] for key, name in names.items() if errors.get(key)}
    return {
        "calls": sum(outcomes.values()),
        "elapsedS": round(elapsed, 3),
        "windowS": window,
        "ok": outcomes.get("OK", 0),
        "okPerS": rate,
        "okPerSWall": rate,
        "admitted": driver.latency_summary([us / 1e6 for us in raw["okUs"]]),
        "inFlight": driver.latency_summary([us / 1e6 for us in raw["inFlightUs"]]),
        "admittedOrWaiting": driver.latency_summary(
            [us / 1e6 for us in raw["okUs"] + raw["inFlightUs"]]
        ),
        "refusedByCode": {k: n for k, n in outcomes.items() if driver.is_refusal(k)},
        "refusal": driver.latency_summary([us / 1e6 for us in raw["refusedUs"]]),
        "refusalsWithRetryAfter": raw["retryAfter"],
        "transportErrors": transport,
        "http5xx": {k: n for k, n in outcomes.items() if k.startswith("HTTP_5")},
        "otherFailures": {
            k: n
            for k, n in outcomes.items()
            if k != "OK" and not driver.is_refusal(k) and not k.startswith("HTTP_5")
        },
        "examples": dict(raw["examples"]),
        "wrk": {
            "sent": raw["sent"],
            "answered": raw["answered"],
            "unanswered": raw["sent"] - raw["answered"],
            "resent": raw["resent"],
            "unmatched": raw["unmatched"],
            "timeouts": errors.get("timeout", 0),
            "inFlightExact": not raw["unmatched"] and not transport,
            # wrk's own histogram: every answer alike, with its coordinated-omission correction.
            "histogramUs": raw.get("histogramUs", {}),
        },
    }


def phase_name(policy: str, callers: int, era: str = MODERN) -> str:
    """The phase's name in the report and the JSON: resend c=200, fresh c=50 2025-11-25."""
    return f"{policy} c={callers}" + ("" if era == MODERN else f" {era}")


def children_cpu_seconds() -> float:
    """CPU of this process's reaped children (wrk's, once it has exited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def run(
    wrk: str, url: str, sent: Request, policy: str, callers: int, seconds: int, prefix: str
) -> dict[str, Any]:
    """One wrk phase; its summary (summarize) with wrk's own CPU per call."""
    with tempfile.TemporaryDirectory(prefix="wf-bench-wrk-") as directory:
        config, out = Path(directory) / "config.lua", Path(directory) / "summary.json"
        config.write_text(config_lua(policy, sent, prefix, out), encoding="utf-8")
        before = children_cpu_seconds()
        process = await asyncio.create_subprocess_exec(
            *command(wrk, url, callers, seconds, config),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(seconds + GRACE_S):
                output, _ = await process.communicate()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        wrk_cpu = children_cpu_seconds() - before
        if process.returncode != 0 or not out.exists():
            tail = output.decode("utf-8", "replace")[-2000:]
            raise RuntimeError(f"wrk exited with {process.returncode}:\n{tail}")
        raw = parse_summary(out.read_text(encoding="utf-8", errors="replace"))
    summary = summarize(raw, float(seconds))
    summary["wrkCpuMsPerCall"] = round(wrk_cpu * 1000 / max(1, summary["calls"]), 3)
    return summary
