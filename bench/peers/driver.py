"""The one load driver of bench-peers: raw HTTP/1.1, prebuilt requests, sequential/closed/open.

Every server under test gets exactly the same driver: keep-alive HTTP/1.1 connections written
and read by hand (bench.peers.driver.Connection), one per closed-loop caller and one per
open-loop call in flight, request lines and headers built once per (Tool, user) and bodies
assembled from prebuilt byte slices, so the driver's own CPU per call stays small (httpx cost
about a millisecond per call, and much more at concurrency); it is measured and reported per
phase. Transport errors and HTTP 5xx are counted apart from the service's own refusals and are
never folded into them. The driver's own collector is paused for each phase (collector_paused):
its full collections held its loop up to 75 ms, which every call in flight counted as latency.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import random
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.harness import MODERN, classify

CAPACITY = "WORKFLOW_CAPACITY_EXHAUSTED"
APPROVE_AT = 650
# The errors that mean the connection, not the service's answer, failed, by the names the
# report has always used (httpx's: a connection closed without an answer is a ReadError).
TRANSPORT_ERRORS = (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError)
TRANSPORT_NAMES: dict[type[BaseException], str] = {
    asyncio.IncompleteReadError: "ReadError",
    ConnectionResetError: "ReadError",
    BrokenPipeError: "WriteError",
    ConnectionRefusedError: "ConnectError",
    asyncio.LimitOverrunError: "RemoteProtocolError",
}
# A call still open after this is the server's backlog (our Tools' syncWaitMs is 20 s).
CALL_TIMEOUT_S = 15.0
DRAIN_LIMIT_S = CALL_TIMEOUT_S + 1.0
# Open loops stop creating arrivals beyond this many per offered second (a bound, not a target).
ARRIVAL_SLACK = 1.5

META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench-peers", "version": "1"},
}
# One example answer (truncated) per failure outcome, so a failure is never just a count.
EXAMPLES: dict[str, str] = {}
_PHASES = itertools.count()
_SCORE, _RID = "\u0001score\u0001", "\u0001rid\u0001"


@contextmanager
def collector_paused() -> Iterator[None]:
    """No collection in the driver while a phase runs (one beforehand, outside its meters)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass(frozen=True)
class Caller:
    """One (Tool, user) pair of a server: its headers and body slices, built once."""

    headers: dict[str, str]
    parts: tuple[bytes, bytes, bytes]

    def body(self, score: int, request_id: str) -> bytes:
        """The tools/call body for one call (only the score and requestId change)."""
        head, middle, tail = self.parts
        return head + str(score).encode() + middle + request_id.encode() + tail


class Connection:
    """One keep-alive HTTP/1.1 connection written and read by hand.

    httpx costs the driver about a millisecond of CPU per call even on a single-connection
    client, and making a client costs several (its TLS context): on a 2-core machine that is
    CPU taken from the server under test. A request here is one write of prebuilt bytes and a
    read of the status line, headers and a Content-Length (or chunked) body.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        """Send head (request line and headers, no Content-Length) and body; status, body."""
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._reader, self._writer
        assert reader is not None
        try:
            writer.write(b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body))
            status, payload, close = await _read_response(reader)
        except BaseException:
            self.close()
            raise
        if close:
            self.close()
        return status, payload

    def close(self) -> None:
        """Drop the connection (the next post opens a new one)."""
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip().lower()
    if headers.get("transfer-encoding") == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        payload = b"".join(parts)
    else:
        payload = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, payload, headers.get("connection") == "close"


def request_head(url: str, headers: dict[str, str]) -> tuple[str, int, bytes]:
    """(host, port, the request's prebuilt line and headers) of a POST to url."""
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    lines = [f"POST {parsed.path or '/'} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return host, port, ("\r\n".join(lines) + "\r\n").encode("latin-1")


def tool_call_caller(
    tool: str, auth: dict[str, str], wrap: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> Caller:
    """A Caller of tools/call `tool`; wrap turns the decide input into the tool's arguments."""
    decide_input: dict[str, Any] = {"creditScore": _SCORE, "requestId": _RID}
    arguments = wrap(decide_input) if wrap else decide_input
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": META},
    }
    text = json.dumps(message, separators=(",", ":"))
    # json.dumps escapes the markers' control characters: split on the escaped spelling.
    head, rest = text.split(json.dumps(_SCORE), 1)
    middle, tail = rest.split(json.dumps(_RID)[1:-1], 1)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
        **auth,
    }
    return Caller(headers, (head.encode(), middle.encode(), tail.encode()))


@dataclass(frozen=True)
class Sample:
    """One call: start (s since the phase began), latency (s), outcome, retryAfterMs."""

    began: float
    latency: float
    outcome: str
    retry_after_ms: int | None = None


def decision_for(score: int) -> str:
    """The expected decision (every answer is checked against it)."""
    return "approve" if score >= APPROVE_AT else "decline"


def outcome_of(status: int, payload: bytes, score: int, request_id: str) -> tuple[str, int | None]:
    """OK, a workflow error code, RPC_n, HTTP_n or WRONG_OUTPUT; and retryAfterMs if any."""
    body = json.loads(payload) if payload else None
    reply = classify(status, body)
    if reply.outcome == "UNKNOWN":
        # An isError result without a workflow error code (the peer's exceptions): a failure.
        return "TOOL_ERROR", None
    if reply.outcome != "OK":
        return reply.outcome, reply.retry_after_ms
    structured = body["result"].get("structuredContent") or {}
    # workflow_invoke wraps the workflow's output; the Gateway and the peer answer it bare.
    output = structured.get("output", structured) if "decision" not in structured else structured
    expected = {"decision": decision_for(score), "requestId": request_id}
    return ("OK" if output == expected else "WRONG_OUTPUT"), None


@dataclass
class Target:
    """A server under test: its MCP URL and its Callers, picked round-robin by call number."""

    name: str
    url: str
    callers: list[Caller]
    run_id: str
    _heads: list[bytes] = field(default_factory=list)

    def head(self, index: int) -> bytes:
        """Caller index's request line and headers, built once."""
        if not self._heads:
            self._heads = [request_head(self.url, c.headers)[2] for c in self.callers]
        return self._heads[index]

    def connection(self) -> Connection:
        """A new (not yet opened) connection to the server."""
        host, port, _ = request_head(self.url, {})
        return Connection(host, port)

    def phase_prefix(self) -> str:
        """A requestId prefix unique to this run and phase (fresh idempotency keys).

        The phase number is process-wide: two Targets of one server (one Tool, then 8) must
        never reuse a requestId, or the peer would find the other layout's workflow under it.
        """
        return f"{self.run_id}-{self.name}-{next(_PHASES)}-"


async def one_call(http: Connection, target: Target, prefix: str, n: int, origin: float) -> Sample:
    """POST one tools/call and classify it (transport errors and timeouts included)."""
    index = n % len(target.callers)
    caller = target.callers[index]
    score, request_id = 600 + n % 100, f"{prefix}{n}"
    began = time.perf_counter()
    retry_after: int | None = None
    try:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            status, payload = await http.post(target.head(index), caller.body(score, request_id))
        outcome, retry_after = outcome_of(status, payload, score, request_id)
        if outcome != "OK" and outcome not in EXAMPLES:
            EXAMPLES[outcome] = payload[:300].decode("utf-8", "replace")
    except TimeoutError:
        http.close()
        outcome = "TIMEOUT_ReadTimeout"
    except TRANSPORT_ERRORS as exc:
        outcome = f"TRANSPORT_{TRANSPORT_NAMES.get(type(exc), type(exc).__name__)}"
        EXAMPLES.setdefault(outcome, repr(exc)[:300])
    except ValueError as exc:
        outcome = f"CLIENT_{type(exc).__name__}"
        EXAMPLES.setdefault(outcome, repr(exc)[:300])
    return Sample(began - origin, time.perf_counter() - began, outcome, retry_after)


async def sequential(target: Target, count: int, seconds: float) -> list[Sample]:
    """count calls one after another (fewer when `seconds` run out first)."""
    prefix, samples = target.phase_prefix(), []
    http = target.connection()
    try:
        origin = time.perf_counter()
        for n in range(count):
            if time.perf_counter() - origin > seconds:
                break
            samples.append(await one_call(http, target, prefix, n, origin))
    finally:
        http.close()
    return samples


async def interleaved(
    first: Target, second: Target, count: int, seconds: float
) -> tuple[list[Sample], list[Sample]]:
    """count calls one after another alternating first and second (one connection each).

    Phases of two servers run minutes apart differ by the machine's drift as much as by the
    servers; alternating call by call compares them at the same moments.
    """
    prefixes = (first.phase_prefix(), second.phase_prefix())
    connections = (first.connection(), second.connection())
    samples: tuple[list[Sample], list[Sample]] = ([], [])
    try:
        origin = time.perf_counter()
        for n in range(count):
            if time.perf_counter() - origin > seconds:
                break
            for side, target in enumerate((first, second)):
                sample = await one_call(connections[side], target, prefixes[side], n, origin)
                samples[side].append(sample)
    finally:
        for http in connections:
            http.close()
    return samples


async def closed_loop(target: Target, callers: int, seconds: float) -> list[Sample]:
    """callers loops for `seconds`; a capacity refusal is retried at once with the same call.

    The immediate retry is the impatient agent: it re-sends the same requestId (the same
    idempotency key), so a refusal costs a round trip, never a second run.
    """
    prefix, samples = target.phase_prefix(), []
    numbers = itertools.count()
    # One connection per caller: a shared pool of many connections costs the driver
    # milliseconds of CPU per call at c >= 50, taken from the server on a 2-core machine.
    clients = [target.connection() for _ in range(callers)]
    try:
        origin = time.perf_counter()
        stop_at = origin + seconds

        async def loop(http: Connection) -> None:
            n = next(numbers)
            while time.perf_counter() < stop_at:
                sample = await one_call(http, target, prefix, n, origin)
                samples.append(sample)
                if sample.outcome != CAPACITY:
                    n = next(numbers)

        await asyncio.gather(*(loop(http) for http in clients))
    finally:
        for http in clients:
            http.close()
    return samples


class ConnectionPool:
    """Connections handed to one call at a time (opened on demand, kept for the next)."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._free: list[Connection] = []
        self._all: list[Connection] = []

    async def call(self, prefix: str, n: int, origin: float) -> Sample:
        """one_call on a free connection of the pool."""
        if self._free:
            http = self._free.pop()
        else:
            http = self._target.connection()
            self._all.append(http)
        try:
            return await one_call(http, self._target, prefix, n, origin)
        finally:
            self._free.append(http)

    def close(self) -> None:
        """Close every connection the pool opened."""
        for http in self._all:
            http.close()


async def open_loop(target: Target, rate: float, seconds: float, seed: int = 1) -> list[Sample]:
    """Poisson arrivals at `rate`/s for `seconds`, bounded in count; stragglers bounded too."""
    prefix, rng = target.phase_prefix(), random.Random(seed)
    limit = int(rate * seconds * ARRIVAL_SLACK) + 1
    pending: list[asyncio.Task[Sample]] = []
    pool = ConnectionPool(target)
    try:
        origin = time.perf_counter()
        next_at = origin
        while next_at < origin + seconds and len(pending) < limit:
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            n = len(pending)
            pending.append(asyncio.create_task(pool.call(prefix, n, origin)))
            next_at += rng.expovariate(rate)
        done, late = await asyncio.wait(pending, timeout=DRAIN_LIMIT_S)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
    finally:
        pool.close()
    samples = [task.result() for task in done]
    return samples + [Sample(0.0, DRAIN_LIMIT_S, "CLIENT_CANCELLED") for _ in late]


def quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted seconds (nearest rank), in ms; NaN for no samples."""
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def latency_summary(latencies: list[float]) -> dict[str, float]:
    """n, p50/p95/p99/max in ms."""
    ordered = sorted(latencies)
    return {
        "n": len(ordered),
        "p50": round(quantile(ordered, 0.5), 2),
        "p95": round(quantile(ordered, 0.95), 2),
        "p99": round(quantile(ordered, 0.99), 2),
        "max": round(ordered[-1] * 1000, 2) if ordered else float("nan"),
    }


def is_refusal(outcome: str) -> bool:
    """A workflow error code answered by the service (not transport, HTTP, RPC or client)."""
    prefixes = ("TRANSPORT_", "TIMEOUT_", "CLIENT_", "HTTP_", "RPC_")
    return outcome not in ("OK", "WRONG_OUTPUT", "TOOL_ERROR") and not outcome.startswith(prefixes)


def goodput(samples: list[Sample], window: float) -> float | None:
    """OK calls that ended within the first `window` seconds, per second of it.

    The loops stop starting calls at the window's end; the calls still open then drain
    afterwards and would stretch the denominator by up to a call timeout.
    """
    if window <= 0:
        return None
    ended = sum(1 for s in samples if s.outcome == "OK" and s.began + s.latency <= window)
    return round(ended / window, 1)


def summarize(samples: list[Sample], elapsed: float, window: float | None = None) -> dict[str, Any]:
    """Goodput, admitted and refusal latencies, and every failure class counted apart."""
    outcomes = Counter(sample.outcome for sample in samples)
    refused = [s for s in samples if is_refusal(s.outcome)]
    wall = round(outcomes.get("OK", 0) / elapsed, 1) if elapsed > 0 else None
    return {
        "calls": len(samples),
        "elapsedS": round(elapsed, 3),
        "windowS": window,
        "ok": outcomes.get("OK", 0),
        "okPerS": goodput(samples, window) if window else wall,
        "okPerSWall": wall,
        "admitted": latency_summary([s.latency for s in samples if s.outcome == "OK"]),
        "refusedByCode": {code: n for code, n in outcomes.items() if is_refusal(code)},
        "refusal": latency_summary([s.latency for s in refused]),
        "refusalsWithRetryAfter": sum(1 for s in refused if s.retry_after_ms is not None),
        "transportErrors": _count(outcomes, ("TRANSPORT_",)),
        "http5xx": {k: n for k, n in outcomes.items() if k.startswith("HTTP_5")},
        "otherFailures": {
            k: n
            for k, n in outcomes.items()
            if k != "OK" and not is_refusal(k) and not k.startswith(("TRANSPORT_", "HTTP_5"))
        },
        "examples": {k: EXAMPLES[k] for k in outcomes if k in EXAMPLES},
    }


def _count(outcomes: Counter[str], prefixes: tuple[str, ...]) -> dict[str, int]:
    return {k: n for k, n in outcomes.items() if k.startswith(prefixes)}
