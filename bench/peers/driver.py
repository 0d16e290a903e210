"""The one load driver of bench-peers: raw httpx, prebuilt requests, sequential/closed/open loops.

Every server under test gets exactly the same driver: single-connection keep-alive HTTP/1.1
`httpx.AsyncClient`s, one per closed-loop caller and one per open-loop call in flight (a
shared pool of many connections costs milliseconds of client CPU per call), request headers
built once per (Tool, user) and bodies assembled from prebuilt byte slices, so the driver's
own CPU per call stays small; it is measured and reported per phase. Transport errors and
HTTP 5xx are counted apart from the service's own refusals and are never folded into them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from bench.harness import MODERN, classify

CAPACITY = "WORKFLOW_CAPACITY_EXHAUSTED"
APPROVE_AT = 650
# The httpx exceptions that mean the connection, not the service's answer, failed.
TRANSPORT_ERRORS = (httpx.ReadError, httpx.RemoteProtocolError, httpx.ConnectError)
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


@dataclass(frozen=True)
class Caller:
    """One (Tool, user) pair of a server: its headers and body slices, built once."""

    headers: dict[str, str]
    parts: tuple[bytes, bytes, bytes]

    def body(self, score: int, request_id: str) -> bytes:
        """The tools/call body for one call (only the score and requestId change)."""
        head, middle, tail = self.parts
        return head + str(score).encode() + middle + request_id.encode() + tail


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


def outcome_of(response: httpx.Response, score: int, request_id: str) -> tuple[str, int | None]:
    """OK, a workflow error code, RPC_n, HTTP_n or WRONG_OUTPUT; and retryAfterMs if any."""
    body = response.json() if response.content else None
    reply = classify(response.status_code, body)
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

    def phase_prefix(self) -> str:
        """A requestId prefix unique to this run and phase (fresh idempotency keys).

        The phase number is process-wide: two Targets of one server (one Tool, then 8) must
        never reuse a requestId, or the peer would find the other layout's workflow under it.
        """
        return f"{self.run_id}-{self.name}-{next(_PHASES)}-"


async def one_call(
    http: httpx.AsyncClient, target: Target, prefix: str, n: int, origin: float
) -> Sample:
    """POST one tools/call and classify it (transport errors and timeouts included)."""
    caller = target.callers[n % len(target.callers)]
    score, request_id = 600 + n % 100, f"{prefix}{n}"
    began = time.perf_counter()
    retry_after: int | None = None
    try:
        response = await http.post(
            target.url, content=caller.body(score, request_id), headers=caller.headers
        )
        outcome, retry_after = outcome_of(response, score, request_id)
        if outcome != "OK" and outcome not in EXAMPLES:
            EXAMPLES[outcome] = response.text[:300]
    except TRANSPORT_ERRORS as exc:
        outcome = f"TRANSPORT_{type(exc).__name__}"
        EXAMPLES.setdefault(outcome, repr(exc)[:300])
    except httpx.TimeoutException as exc:
        outcome = f"TIMEOUT_{type(exc).__name__}"
    except (httpx.HTTPError, ValueError) as exc:
        outcome = f"CLIENT_{type(exc).__name__}"
        EXAMPLES.setdefault(outcome, repr(exc)[:300])
    return Sample(began - origin, time.perf_counter() - began, outcome, retry_after)


def client(connections: int) -> httpx.AsyncClient:
    """A lean client: a keep-alive HTTP/1.1 pool of exactly `connections`."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    timeout = httpx.Timeout(CALL_TIMEOUT_S, pool=None)
    return httpx.AsyncClient(limits=limits, timeout=timeout, http1=True, http2=False)


async def sequential(target: Target, count: int, seconds: float) -> list[Sample]:
    """count calls one after another (fewer when `seconds` run out first)."""
    prefix, samples = target.phase_prefix(), []
    async with client(1) as http:
        origin = time.perf_counter()
        for n in range(count):
            if time.perf_counter() - origin > seconds:
                break
            samples.append(await one_call(http, target, prefix, n, origin))
    return samples


async def closed_loop(target: Target, callers: int, seconds: float) -> list[Sample]:
    """callers loops for `seconds`; a capacity refusal is retried at once with the same call.

    The immediate retry is the impatient agent: it re-sends the same requestId (the same
    idempotency key), so a refusal costs a round trip, never a second run.
    """
    prefix, samples = target.phase_prefix(), []
    numbers = itertools.count()
    # One single-connection client per caller: a shared pool of many connections costs the
    # driver milliseconds of CPU per call at c >= 50 (its pool is scanned on every request),
    # which on a 2-core machine is taken from the server under test.
    clients = [client(1) for _ in range(callers)]
    try:
        origin = time.perf_counter()
        stop_at = origin + seconds

        async def loop(http: httpx.AsyncClient) -> None:
            n = next(numbers)
            while time.perf_counter() < stop_at:
                sample = await one_call(http, target, prefix, n, origin)
                samples.append(sample)
                if sample.outcome != CAPACITY:
                    n = next(numbers)

        await asyncio.gather(*(loop(http) for http in clients))
    finally:
        await asyncio.gather(*(http.aclose() for http in clients))
    return samples


class ClientPool:
    """Single-connection clients handed to one call at a time (made on demand, kept)."""

    def __init__(self) -> None:
        self._free: list[httpx.AsyncClient] = []
        self._all: list[httpx.AsyncClient] = []

    async def call(self, target: Target, prefix: str, n: int, origin: float) -> Sample:
        """one_call on a free client of the pool."""
        if self._free:
            http = self._free.pop()
        else:
            http = client(1)
            self._all.append(http)
        try:
            return await one_call(http, target, prefix, n, origin)
        finally:
            self._free.append(http)

    async def aclose(self) -> None:
        """Close every client the pool made."""
        await asyncio.gather(*(http.aclose() for http in self._all))


async def open_loop(target: Target, rate: float, seconds: float, seed: int = 1) -> list[Sample]:
    """Poisson arrivals at `rate`/s for `seconds`, bounded in count; stragglers bounded too."""
    prefix, rng = target.phase_prefix(), random.Random(seed)
    limit = int(rate * seconds * ARRIVAL_SLACK) + 1
    pending: list[asyncio.Task[Sample]] = []
    pool = ClientPool()
    try:
        origin = time.perf_counter()
        next_at = origin
        while next_at < origin + seconds and len(pending) < limit:
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            n = len(pending)
            pending.append(asyncio.create_task(pool.call(target, prefix, n, origin)))
            next_at += rng.expovariate(rate)
        done, late = await asyncio.wait(pending, timeout=DRAIN_LIMIT_S)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
    finally:
        await pool.aclose()
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
