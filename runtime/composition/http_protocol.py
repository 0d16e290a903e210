"""uvicorn's httptools protocol, letting the app's front door answer a POST as soon as it is read.

uvicorn starts a request's ASGI task when its headers are in. A call the front door refuses
then waits for that task's first turn of the event loop, behind every callback already queued
(under overload: the admissions in progress), and costs the task, the ASGI events and the
middleware around them. Here a POST's task waits for its body instead, and `early_answer`
sees the request then, in the loop's I/O phase: it returns the JSON body of a 200 answer, which
is written at once and ends the request, or None, and the task starts as uvicorn would have
started it (the app reads the same body from `receive`). Measured on one Tool at twice its
capacity, see docs/PERFORMANCE.md.

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

import logging
from collections.abc import Callable, MutableMapping
from typing import Any, ClassVar, cast

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

log = logging.getLogger("workflow.http")

# (the request's ASGI scope, its whole body) -> the JSON body of a 200 answer, or None.
EarlyAnswer = Callable[[MutableMapping[str, Any], bytes], bytes | None]

_Held = tuple[RequestResponseCycle, ASGI3Application]

# uvicorn's non-public names this module uses: methods of HttpToolsProtocol, attributes a
# RequestResponseCycle sets in its __init__ (checked against the installed uvicorn by a test).
PRIVATE_NAMES = {
    "HttpToolsProtocol": ("_start_asgi_task", "on_body", "on_message_complete", "server_state"),
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
        """A held request dies with its connection (no task was started for it)."""
        self._held = None
        super().connection_lost(exc)

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
        else:
            self._write_answer(cycle, answer)

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
