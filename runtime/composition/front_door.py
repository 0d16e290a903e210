"""workflow_invoke's front door as ASGI middleware: in front of litestar, bearers and schemas.

Only a POST /mcp whose body is a tools/call of workflow_invoke goes through the door
(runtime.admission.door); everything else passes straight to the app. The door reads what it
needs of such a body (the JSON-RPC id and the protocol era) with the app's own decoder and
era rules, and hands the body on unchanged. Anything it cannot read (invalid JSON, a body over
the size bound, a request the era rules refuse) is left to the app, which answers it as ever.

A call the door refuses is answered here, in a fraction of a millisecond: the tools/call result
of its era with isError and WORKFLOW_CAPACITY_EXHAUSTED (retryable, retryAfterMs). It is
refused before its bearer is verified: the refusal names no Tool and no host, so it tells an
unauthenticated caller nothing but that the service is overloaded. A repeat of a call the door
let through within the last 30 s (a retry after WORKFLOW_TIMEOUT) is not judged: it goes on to
the app, whose idempotency lookup re-attaches it to its run before any capacity check.

`serve` judges a call earlier still: its HTTP server hands each POST, once read, to
FrontDoor.answer_on_arrival before any task serves it (runtime.composition.http_protocol), so a
refusal is written in the same turn of the event loop instead of waiting for a task's turn
behind the admissions in progress. FrontDoor then only queues the calls let through; under
any other server (the tests' ASGI transports) it reads and judges them itself, the same way.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import msgspec

from runtime.admission import Admission, door
from runtime.admission.prediction import capacity_exhausted
from runtime.mcp.dispatch import error_outcome
from runtime.mcp.jsonrpc import (
    JsonRpcFault,
    decode_body,
    is_request_id,
    remember_decoded,
    result_response,
)
from runtime.mcp.protocol import SERVER_INFO_KEY, Era, resolve_era
from runtime.mcp.server import SERVER_INFO
from runtime.telemetry import metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
# Any ASGI application (litestar types its own scope and events more narrowly).
ASGIApp = Callable[..., Awaitable[None]]

TOOL = "workflow_invoke"
# Bodies above this are left to the app (which bounds request sizes itself).
MAX_READ_BYTES = 1024 * 1024
_NEEDLE = TOOL.encode()
# The scope key under which answer_on_arrival leaves what it judged for FrontDoor.
ARRIVAL = "workflow.front_door.arrival"


class FrontDoor:
    """Wraps the service's ASGI app: workflow_invoke calls queue at, or are refused by, the door
    of the process's admission (the one its handlers admit with)."""

    def __init__(self, app: ASGIApp, admission: Admission) -> None:
        self.app = app
        self.door = admission.door
        self._let_through = _LetThrough()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection event."""
        if not _maybe_invoke(scope) or self.door.limit <= 0:
            await self.app(scope, receive, send)
            return
        arrival = scope.get(ARRIVAL)
        if isinstance(arrival, _Arrival):
            # Judged on arrival by the HTTP server (answer_on_arrival), and let through.
            if arrival.call is None or arrival.attach:
                await self.app(scope, receive, send)
            else:
                await self._through(arrival.at, arrival.call, scope, receive, send)
            return
        arrived_at = time.monotonic()
        body, complete = await _read_body(receive)
        replay = _replaying(body, complete, receive)
        call = _invoke_call(body, scope) if complete else None
        if call is None or self._let_through.repeats(call.fingerprint, arrived_at):
            await self.app(scope, replay, send)
            return
        retry_after = self.door.judge(arrived_at, call.fingerprint)
        if retry_after is not None:
            await _send_json(send, _refusal(call, retry_after))
            return
        await self._through(arrived_at, call, scope, replay, send)

    async def _through(
        self, arrived_at: float, call: _Call, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Wait for a place past the door, then serve the call with it."""
        try:
            place = await self.door.enter(arrived_at)
        except door.DoorClosed:
            # Shutting down: answered now (retryable) instead of cut off by the grace period.
            await _send_json(send, _refusal(call, self.door.settings.retry_after_min_ms))
            return
        door.passed(arrived_at, place)
        self._let_through.remember(call.fingerprint, arrived_at)
        try:
            await self.app(scope, receive, send)
        finally:
            place.leave()

    def answer_on_arrival(self, scope: Scope, body: bytes) -> tuple[bytes, int] | None:
        """The JSON answer of a workflow_invoke call the door refuses on arrival, with its
        retryAfterMs (the HTTP server paces a client refused again sooner); else None.

        The HTTP server calls it as soon as a POST is read whole
        (runtime.composition.http_protocol), before any task serves the request: a refusal is
        answered in the same turn of the event loop. What the door learnt of a call it lets
        through is left in the scope, so __call__ does not read or judge it again.
        """
        if not _maybe_invoke(scope) or self.door.limit <= 0:
            return None
        arrived_at = time.monotonic()
        call = _invoke_call(body, scope) if len(body) <= MAX_READ_BYTES else None
        if call is not None and self._let_through.repeats(call.fingerprint, arrived_at):
            scope[ARRIVAL] = _Arrival(arrived_at, call, attach=True)
            return None
        if call is not None:
            retry_after = self.door.judge(arrived_at, call.fingerprint)
            if retry_after is not None:
                return _refusal(call, retry_after), retry_after
        scope[ARRIVAL] = _Arrival(arrived_at, call)
        return None


def _maybe_invoke(scope: Scope) -> bool:
    if scope.get("type") != "http" or scope.get("method") != "POST":
        return False
    return str(scope.get("path", "")).rstrip("/") == "/mcp"


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The request body, and whether it was read whole (False: over the bound, or cut off)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > MAX_READ_BYTES:
            return b"".join(chunks), False


def _replaying(body: bytes, complete: bool, receive: Receive) -> Receive:
    """A receive that hands the app the body already read, then the connection's own events."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replay


class _Call(msgspec.Struct, frozen=True):
    """What the door must know of a call to answer it: its id and era, and its arguments'
    fingerprint (a retry of the same call has the same one)."""

    request_id: str | int
    era: Era
    fingerprint: int | None


class _Arrival(msgspec.Struct, frozen=True):
    """A request judged on arrival and let through: when it came, the call (None: not one),
    and whether it repeats a call let through within the attach window (it skips the door)."""

    at: float
    call: _Call | None
    attach: bool = False


# The longest a run of a call let through can still be live: a Tool's total deadline is at most
# 30 s (seed 000, totalDeadlineMs). A repeat within it may re-attach to that run.
ATTACH_WINDOW_S = 30.0
MAX_REMEMBERED = 10_000


class _LetThrough:
    """Fingerprints of calls the door let through, each until its run can no longer be live.

    Seed 000 Idempotency: "The attach check runs before admission, so it skips capacity
    checks"; a retry after WORKFLOW_TIMEOUT re-attaches to its run. Refused at the door, such a
    retry would get WORKFLOW_CAPACITY_EXHAUSTED with no instance id while its run is live, so a
    repeat of a call let through goes past the door to the app, which authenticates it and
    looks its key up as ever (and admits it against capacity if it is not a re-attach after
    all). Per process: a retry that lands on another replica meets that replica's door.
    """

    def __init__(self) -> None:
        self._until: dict[int, float] = {}

    def remember(self, fingerprint: int | None, now: float) -> None:
        """Record a call let through at now."""
        if fingerprint is None:
            return
        self._until.pop(fingerprint, None)
        if len(self._until) >= MAX_REMEMBERED:
            self._until = {key: until for key, until in self._until.items() if until > now}
            while len(self._until) >= MAX_REMEMBERED:
                del self._until[next(iter(self._until))]
        self._until[fingerprint] = now + ATTACH_WINDOW_S

    def repeats(self, fingerprint: int | None, now: float) -> bool:
        """Whether a call with this fingerprint was let through within the attach window."""
        if fingerprint is None or (until := self._until.get(fingerprint)) is None:
            return False
        if until <= now:
            del self._until[fingerprint]
            return False
        return True


def _invoke_call(body: bytes, scope: Scope) -> _Call | None:
    """The id and era of a tools/call of workflow_invoke; None for anything else."""
    if _NEEDLE not in body:
        return None
    try:
        message = decode_body(body)
    except JsonRpcFault:
        return None
    remember_decoded(scope, body, message)  # the app's, not decoded again
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    request_id = message.get("id")
    if not isinstance(params, dict) or params.get("name") != TOOL or not is_request_id(request_id):
        return None
    headers = {
        key.decode("latin-1").lower(): value.decode("latin-1")
        for key, value in scope.get("headers", [])
    }
    try:
        era = resolve_era(message, headers)
    except JsonRpcFault:
        return None
    return _Call(request_id, era.era, _fingerprint(params.get("arguments")))


def _fingerprint(arguments: object) -> int | None:
    """The same for the same arguments (within this process), whatever the JSON-RPC id."""
    try:
        return hash(msgspec.json.encode(arguments))
    except (TypeError, msgspec.EncodeError):
        return None


def _refusal(call: _Call, retry_after_ms: int) -> bytes:
    """The JSON answer refusing call (its era's tools/call result), counted as refused."""
    result = error_outcome(capacity_exhausted("interactive", retry_after_ms)).to_call_result()
    if call.era is Era.MODERN:
        result = {"resultType": "complete", **result, "_meta": {SERVER_INFO_KEY: SERVER_INFO}}
    metrics.labelled(metrics.TOOL_CALLS, TOOL, "WORKFLOW_CAPACITY_EXHAUSTED").inc()
    metrics.DOOR_REFUSALS.inc()
    return msgspec.json.encode(result_response(call.request_id, result))


async def _send_json(send: Send, content: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(content)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": content})
