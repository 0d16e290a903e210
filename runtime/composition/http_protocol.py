"""uvicorn's httptools protocol, letting the app's front door answer a POST as soon as it is read.

uvicorn starts a request's ASGI task when its headers are in. A call the front door refuses
then waits for that task's first turn of the event loop, behind every callback already queued
(under overload: the admissions in progress), and costs the task, the ASGI events and the
middleware around them. Here a POST's task waits for its body instead, and `early_answer`
sees the request then, in the loop's I/O phase: it returns the JSON body of a 200 answer, which
is written at once and ends the request, or None, and the task starts as uvicorn would have
started it (the app reads the same body from `receive`). Measured on one Tool at twice its
capacity, see docs/PERFORMANCE.md.

Paced refusals: an early answer may say when its client should come back (a refusal's
retryAfterMs). A client that sends its next request on the same connection before then and is
refused again gets that answer no sooner than the moment the earlier refusal named: repeating a
refusal at once is then no cheaper for a client than waiting retryAfterMs, so an impatient
client (an agent retrying at once, a load generator) cannot spin on refusals and take the CPU
the admitted calls need. A client that waits retryAfterMs, or is let through, is never held.
A held answer holds the connection's later pipelined requests behind it, as any slow answer
would; at shutdown it is written at once.

Left to uvicorn unchanged: every other method; a POST that expects `100 Continue` (its body
comes only once the app asks for it); a body over uvicorn's own read-ahead bound (the task
starts when reading pauses, so the app's `receive` resumes it); pipelined requests (each is
held, then answered or started, in its turn).

It extends uvicorn's protocol where uvicorn starts a task (`_start_asgi_task`), which is not
public API; it is the one module of the service that reaches below uvicorn's public API
(PRIVATE_NAMES lists what it uses). uvicorn is pinned; tests/unit/test_pinned_internals.py
fails, naming this module, when the installed version differs from the pin or lacks a name
used here, and tests/integration/composition/test_http_early_answer.py checks each case above
on the wire against the pinned version.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, MutableMapping
from typing import Any, ClassVar, cast

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

log = logging.getLogger("workflow.http")

# (the request's ASGI scope, its whole body) -> the JSON body of a 200 answer and the time (ms)
# before which its client should not come back (0: any time), or None: the app serves it.
EarlyAnswer = Callable[[MutableMapping[str, Any], bytes], tuple[bytes, int] | None]

_Held = tuple[RequestResponseCycle, ASGI3Application]

# uvicorn's non-public names this module uses: methods of HttpToolsProtocol, attributes a
# RequestResponseCycle sets in its __init__ (checked against the installed uvicorn by a test).
PRIVATE_NAMES = {
    "HttpToolsProtocol": (
        "_start_asgi_task",
        "on_body",
        "on_message_complete",
        "shutdown",
        "server_state",
        "transport",
        "loop",
    ),
    "RequestResponseCycle": (
        "body",
        "more_body",
        "waiting_for_100_continue",
        "response_started",
        "response_complete",
        "disconnected",
        "keep_alive",
        "on_response",
    ),
}


class EarlyAnswerProtocol(HttpToolsProtocol):
    """HttpToolsProtocol that holds a POST's ASGI task until its body is read."""

    early_answer: ClassVar[EarlyAnswer]
    _held: _Held | None = None
    # Loop time before which this connection's client was told not to come back.
    _come_back_at: float = 0.0
    # An answer written later (a paced refusal): its cycle, body and timer.
    _paced: tuple[RequestResponseCycle, bytes, asyncio.TimerHandle] | None = None

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        if cycle.scope["method"] != "POST" or cycle.waiting_for_100_continue:
            super()._start_asgi_task(cycle, app)
        elif cycle.more_body:
            self._held = (cycle, app)
        else:
            # A pipelined request whose body was read while the one before it ran.
            self._answer_or_start(cycle, app)

    def on_body(self, body: bytes) -> None:
        """Take a piece of the body; a held request whose body grows past the bound starts."""
        super().on_body(body)
        held = self._held
        if held is not None and len(held[0].body) > HIGH_WATER_LIMIT:
            # uvicorn has paused reading: only the app's receive resumes it.
            self._held = None
            super()._start_asgi_task(*held)

    def on_message_complete(self) -> None:
        """The request is read whole: a held one is answered now, or its task starts."""
        super().on_message_complete()
        held, self._held = self._held, None
        if held is not None:
            self._answer_or_start(*held)

    def connection_lost(self, exc: Exception | None) -> None:
        """A held request, or a paced answer, dies with its connection."""
        self._held = None
        paced, self._paced = self._paced, None
        if paced is not None:
            paced[2].cancel()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        """Graceful shutdown: a paced answer is written now (then the connection closes)."""
        paced = self._paced
        if paced is not None:
            paced[2].cancel()
            paced[0].keep_alive = False
            self._write_paced()
        super().shutdown()

    def _answer_or_start(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        if cycle.response_complete or cycle.disconnected:
            return
        # uvicorn types the scope as a TypedDict; the hook, like ASGI middleware, may add keys.
        scope = cast(MutableMapping[str, Any], cycle.scope)
        try:
            answer = type(self).early_answer(scope, bytes(cycle.body))
        except Exception:
            # Raised out of data_received it would drop the connection unanswered: the app,
            # which answers every request, serves it instead.
            log.exception("the early answer failed; the app serves the request")
            answer = None
        if answer is None:
            super()._start_asgi_task(cycle, app)
            return
        body, come_back_ms = answer
        now = self.loop.time()
        write_at = self._come_back_at
        if come_back_ms > 0:
            self._come_back_at = max(now, write_at) + come_back_ms / 1000
        if write_at <= now:
            self._write_answer(cycle, body)
        else:
            # Refused again before the last refusal's retryAfterMs was up: answered then.
            timer = self.loop.call_at(write_at, self._write_paced)
            self._paced = (cycle, body, timer)

    def _write_paced(self) -> None:
        paced, self._paced = self._paced, None
        if paced is not None and not (paced[0].disconnected or self.transport.is_closing()):
            self._write_answer(paced[0], paced[1])

    def _write_answer(self, cycle: RequestResponseCycle, body: bytes) -> None:
        """Write a whole 200 JSON answer in one write, and end the request as uvicorn does."""
        lines = [b"HTTP/1.1 200 OK\r\n"]
        lines += [b"%s: %s\r\n" % header for header in self.server_state.default_headers]
        lines.append(b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body))
        if not cycle.keep_alive:
            lines.append(b"connection: close\r\n")
        lines += [b"\r\n", body]
        self.transport.write(b"".join(lines))
        cycle.response_started = cycle.response_complete = True
        if not cycle.keep_alive:
            self.transport.close()
        cycle.on_response()


def answering(early_answer: EarlyAnswer) -> type[EarlyAnswerProtocol]:
    """An EarlyAnswerProtocol class whose requests go to early_answer first."""
    members = {"early_answer": staticmethod(early_answer)}
    return type("EarlyAnswering", (EarlyAnswerProtocol,), members)
