"""A stand-in for a Lightspeed session (the holder of Promises) and its content store, over HTTP.

    python -m examples.lightspeed_holder serve [--port 18090]
    python -m examples.lightspeed_holder push --tool demo.echo.v1 --args '{"text":"hi"}' --times 2
    python -m examples.lightspeed_holder state

What is simulated, plainly: Temporal is not here. A Lightspeed session is a Temporal workflow
that receives `deliver_emission` signals; this process is one such session (workflow id
`{universe}/{session}`) reached by `POST /deliver_emission {"workflow_id", "envelope"}`, and
Lightspeed's CAS is `GET/PUT /cas/sha256:<hex>` on the same port. It records each Promise's
source at admission (`POST /promises`), accepts a source_resolution only from that source (E7)
and only while the Promise is pending (E10), dedupes emission ids itself (E3), and reads
completion keys as exactly `reply` (E15). Like a signal, a delivery answers only "delivered":
its verdict is in `GET /state`. `push` plays the session's side of a pushed tool call: it puts
the arguments in the CAS, admits the Promise, and sends the tool_invocation envelope to
workflow-mcp's `workflow_emission_deliver` (deliberately `--times` times). Not simulated: the
session log, lifecycle control (run_terminal), code-tool scopes, channels, transcription.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib import error as urlerror
from urllib import request as urlrequest

from runtime.lightspeed import (
    ContractError,
    PromiseSource,
    Verdict,
    admit_source_resolution,
    content_ref,
    invocation_cancellation_id,
    parse_envelope,
    session_workflow_id,
)

DEFAULT_PORT = 18090
DEFAULT_UNIVERSE = "6f3a1a52-58c1-4f0e-9c2d-1a2b3c4d5e6f"
DEFAULT_SESSION = "bot:v1:demo"
DEFAULT_RECEIVER = "workflow-mcp/receiver/demo"
MCP_VERSION = "2025-11-25"


@dataclass
class Promise:
    """One Promise as the session admitted it, and how it ended."""

    promise_id: str
    source_workflow_id: str
    state: str = "pending"
    resolution: dict[str, Any] | None = None
    accepted_emission_id: str | None = None


@dataclass
class HolderState:
    """The session's Promises, its dedupe set, its CAS and every delivery's verdict."""

    universe_id: str = DEFAULT_UNIVERSE
    session_id: str = DEFAULT_SESSION
    promises: dict[str, Promise] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    cas: dict[str, bytes] = field(default_factory=dict)
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    next_promise: int = 1
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def workflow_id(self) -> str:
        """The session's stable workflow id: `{universe}/{session}`."""
        return session_workflow_id(self.universe_id, self.session_id)

    def admit_promise(self, source_workflow_id: str, promise_id: str | None = None) -> str:
        """A new pending Promise whose source is fixed now (E7)."""
        with self.lock:
            if promise_id is None:
                promise_id = f"promise_{self.next_promise}"
                self.next_promise += 1
            self.promises[promise_id] = Promise(promise_id, source_workflow_id)
            return promise_id

    def cancel_promise(self, promise_id: str) -> None:
        """The session cancels the Promise: terminal, later replies are ignored (E10)."""
        with self.lock:
            promise = self.promises[promise_id]
            if promise.state == "pending":
                promise.state = "cancelled"
                promise.resolution = {"kind": "cancelled"}

    def deliver(self, workflow_id: str, document: Any) -> str:
        """One deliver_emission signal; the verdict (recorded, never answered to the sender)."""
        try:
            envelope = parse_envelope(document)
        except ContractError as error:
            verdict = f"rejected_malformed: {error}"
            self._record(None, verdict)
            return verdict
        with self.lock:
            if envelope.body.kind != "source_resolution":
                verdict = Verdict.NOT_A_RESOLUTION.value
            else:
                promise = self.promises.get(envelope.body.fields["promise_id"])
                source = None
                if promise is not None:
                    source = PromiseSource(
                        self.universe_id,
                        promise.source_workflow_id,
                        self.workflow_id,
                        terminal=promise.state != "pending",
                    )
                seen = envelope.emission_id in self.seen
                verdict = admit_source_resolution(envelope, source, seen=seen).value
                if verdict == Verdict.ACCEPTED.value:
                    assert promise is not None and envelope.body.resolution is not None
                    promise.state = envelope.body.resolution.kind
                    promise.resolution = envelope.body.resolution.document()
                    promise.accepted_emission_id = envelope.emission_id
                if not seen:
                    self.seen.add(envelope.emission_id)
        self._record(envelope.emission_id, verdict, document)
        return verdict

    def _record(self, emission_id: str | None, verdict: str, envelope: Any = None) -> None:
        with self.lock:
            self.deliveries.append(
                {"emission_id": emission_id, "verdict": verdict, "envelope": envelope}
            )

    def document(self) -> dict[str, Any]:
        """The state as GET /state shows it."""
        with self.lock:
            counts: dict[str, int] = {}
            for delivery in self.deliveries:
                key = delivery["verdict"].split(":")[0]
                counts[key] = counts.get(key, 0) + 1
            return {
                "workflow_id": self.workflow_id,
                "promises": {
                    p.promise_id: {
                        "source_workflow_id": p.source_workflow_id,
                        "state": p.state,
                        "resolution": p.resolution,
                        "accepted_emission_id": p.accepted_emission_id,
                    }
                    for p in self.promises.values()
                },
                "counts": counts,
                "deliveries": list(self.deliveries),
            }


def make_handler(state: HolderState) -> type[BaseHTTPRequestHandler]:
    """The request handler class serving state."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _reply(self, status: int, body: Any = None, raw: bytes | None = None) -> None:
            data = raw if raw is not None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header(
                "Content-Type", "application/json" if raw is None else "application/octet-stream"
            )
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_GET(self) -> None:
            if self.path == "/state":
                self._reply(200, state.document())
            elif self.path.startswith("/cas/"):
                data = state.cas.get(self.path.removeprefix("/cas/"))
                self._reply(404, {"error": "no such content"}) if data is None else self._reply(
                    200, raw=data
                )
            else:
                self._reply(404, {"error": "not found"})

        def do_PUT(self) -> None:
            ref = self.path.removeprefix("/cas/")
            data = self._body()
            if not self.path.startswith("/cas/") or content_ref(data) != ref:
                self._reply(400, {"error": "the bytes are not the reference's"})
                return
            state.cas[ref] = data
            self._reply(201, {"ref": ref})

        def do_POST(self) -> None:
            try:
                body = json.loads(self._body() or b"{}")
            except json.JSONDecodeError:
                self._reply(400, {"error": "not JSON"})
                return
            self._reply(*post(state, self.path, body))

    return Handler


def post(state: HolderState, path: str, body: Any) -> tuple[int, Any]:
    """A POST's status and answer: a delivery, a Promise admitted, or a Promise cancelled."""
    if path == "/deliver_emission":
        if body.get("workflow_id") != state.workflow_id:
            # A signal to a workflow id that does not exist fails for the sender.
            return 404, {"error": f"no workflow {body.get('workflow_id')!r}"}
        state.deliver(body["workflow_id"], body.get("envelope"))
        return 200, {"delivered": True}
    if path == "/promises":
        return 201, {
            "promise_id": state.admit_promise(body["source_workflow_id"], body.get("promise_id"))
        }
    if path.startswith("/promises/") and path.endswith("/cancel"):
        promise_id = path.removeprefix("/promises/").removesuffix("/cancel")
        if promise_id not in state.promises:
            return 404, {"error": "no such promise"}
        state.cancel_promise(promise_id)
        return 200, {"promise_id": promise_id, "state": "cancelled"}
    return 404, {"error": "not found"}


def serve(state: HolderState, port: int) -> ThreadingHTTPServer:
    """A server on 127.0.0.1:port (0: a free one), not yet serving."""
    return ThreadingHTTPServer(("127.0.0.1", port), make_handler(state))


# --- the session's side of a pushed call (the `push` command) ---------------------------------


def _http(
    method: str,
    url: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urlrequest.Request(url, data=data, method=method, headers=headers or {})
    if raw is None and body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urlrequest.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urlerror.HTTPError as failure:
        text = failure.read()
        try:
            return failure.code, json.loads(text)
        except json.JSONDecodeError:
            return failure.code, text.decode(errors="replace")


def invocation_envelope(
    universe_id: str,
    session_id: str,
    tool_id: str,
    arguments_ref: str,
    promise_id: str,
    invocation_id: str,
    log_seq: int,
) -> dict[str, Any]:
    """A tool_invocation envelope as the session emits it (E4: its id is the invocation id)."""
    return {
        "emission_id": invocation_id,
        "producer": {
            "kind": "session",
            "universe_id": universe_id,
            "session_id": session_id,
            "log_seq": log_seq,
        },
        "body": {
            "kind": "tool_invocation",
            "holder_workflow_id": session_workflow_id(universe_id, session_id),
            "invocation": {
                "arguments_ref": arguments_ref,
                "binding_fingerprint": "binding:v1:demo",
                "completion_promises": {"reply": promise_id},
                "execution_context_ref": None,
                "invocation_id": invocation_id,
                "run_id": 1,
                "schema_revision": 1,
                "semantic_type": tool_id,
                "session_id": session_id,
                "session_universe_id": universe_id,
                "tool_batch_id": 1,
                "tool_call_id": f"call_{log_seq}",
                "tool_id": tool_id,
                "turn_id": 1,
            },
        },
    }


def cancellation_envelope(
    universe_id: str, session_id: str, invocation_id: str, promise_id: str, log_seq: int
) -> dict[str, Any]:
    """The best-effort invocation_cancellation notice for an invocation's reply Promise."""
    return {
        "emission_id": invocation_cancellation_id(invocation_id, "reply"),
        "producer": {
            "kind": "session",
            "universe_id": universe_id,
            "session_id": session_id,
            "log_seq": log_seq,
        },
        "body": {
            "kind": "invocation_cancellation",
            "invocation_id": invocation_id,
            "completion_key": "reply",
            "promise_id": promise_id,
        },
    }


def call_deliver(mcp_url: str, headers: dict[str, str], arguments: dict[str, Any]) -> Any:
    """workflow_emission_deliver over MCP (the Gateway or the service); its structured result."""
    body = {
        "jsonrpc": "2.0",
        "id": str(uuid.uuid4()),
        "method": "tools/call",
        "params": {"name": "workflow_emission_deliver", "arguments": arguments},
    }
    status, answer = _http(
        "POST",
        mcp_url,
        body,
        {**headers, "MCP-Protocol-Version": MCP_VERSION, "Accept": "application/json"},
    )
    if status != 200 or not isinstance(answer, dict) or "result" not in answer:
        return {"httpStatus": status, "answer": answer}
    return answer["result"].get("structuredContent")


def _headers() -> dict[str, str]:
    headers = {}
    if os.environ.get("USER_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['USER_TOKEN']}"
    if os.environ.get("APP_TOKEN"):
        headers["X-Scope-Token"] = f"Bearer {os.environ['APP_TOKEN']}"
    return headers


def push(args: argparse.Namespace) -> int:
    """Push one invocation (args --times times), optionally cancel it; print what happened."""
    holder = args.holder_url.rstrip("/")
    _, state = _http("GET", f"{holder}/state")
    universe, session = state["workflow_id"].split("/", 1)
    data = args.args.encode()
    ref = "sha256:" + hashlib.sha256(data).hexdigest()
    _http("PUT", f"{holder}/cas/{ref}", raw=data)
    # The Promise's source, fixed at admission: the execution a start-on-call binding launches,
    # or the receiver a pushed binding authorizes (E7, E16).
    source = args.start or args.source
    _, made = _http("POST", f"{holder}/promises", {"source_workflow_id": source})
    promise_id = made["promise_id"]
    invocation_id = "wti:sha256:" + hashlib.sha256(uuid.uuid4().bytes).hexdigest()
    envelope = invocation_envelope(universe, session, args.tool, ref, promise_id, invocation_id, 1)
    arguments: dict[str, Any] = {"envelope": envelope}
    if args.start:
        arguments = {
            "startArgs": {
                "universe_id": universe,
                "holder_workflow_id": state["workflow_id"],
                "execution_id": args.start,
                "invocation": envelope["body"]["invocation"],
            }
        }
    results = [call_deliver(args.mcp_url, _headers(), arguments) for _ in range(args.times)]
    if args.cancel_after is not None:
        time.sleep(args.cancel_after)
        _http("POST", f"{holder}/promises/{promise_id}/cancel")
        notice = cancellation_envelope(universe, session, invocation_id, promise_id, 2)
        results.append(call_deliver(args.mcp_url, _headers(), {"envelope": notice}))
    report = {
        "invocation_id": invocation_id,
        "promise_id": promise_id,
        "arguments_ref": ref,
        "deliveries": results,
    }
    print(json.dumps(report, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    """The command line: serve, push, state."""
    parser = argparse.ArgumentParser(prog="python -m examples.lightspeed_holder")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve the holder and its content store")
    run.add_argument("--port", type=int, default=DEFAULT_PORT)
    run.add_argument("--universe", default=DEFAULT_UNIVERSE)
    run.add_argument("--session", default=DEFAULT_SESSION)
    run = commands.add_parser("push", help="push a tool invocation to workflow-mcp")
    run.add_argument("--holder-url", default=f"http://127.0.0.1:{DEFAULT_PORT}")
    run.add_argument(
        "--mcp-url",
        default="http://127.0.0.1:8787/mcp",
        help="the Gateway's or the service's /mcp (USER_TOKEN, APP_TOKEN from env)",
    )
    run.add_argument("--tool", required=True, help="the Lightspeed tool_id")
    run.add_argument("--args", default="{}", help="the model's arguments (JSON text, put in CAS)")
    run.add_argument("--times", type=int, default=1, help="deliver the same envelope N times")
    run.add_argument("--cancel-after", type=float, default=None, help="then cancel after S s")
    run.add_argument(
        "--source",
        default=DEFAULT_RECEIVER,
        help="the Promise source: the receiver workflow id the binding authorizes",
    )
    run.add_argument(
        "--start",
        default=None,
        metavar="EXECUTION_ID",
        help="start-on-call: send WorkflowToolStartArgs with this execution id instead",
    )
    run = commands.add_parser("state", help="print the holder's state")
    run.add_argument("--holder-url", default=f"http://127.0.0.1:{DEFAULT_PORT}")
    args = parser.parse_args(argv)
    if args.command == "serve":
        state = HolderState(universe_id=args.universe, session_id=args.session)
        server = serve(state, args.port)
        print(
            f"lightspeed holder {state.workflow_id} on http://127.0.0.1:{server.server_port}",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
        return 0
    if args.command == "push":
        return push(args)
    _, state_doc = _http("GET", f"{args.holder_url.rstrip('/')}/state")
    print(json.dumps(state_doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
