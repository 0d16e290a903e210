"""A tiny protected backend for the write-Tool examples (standard library only).

    python -m examples.backend [--port 8790]

POST /notes with `Authorization: Bearer <token>` and a JSON body {claimId, note} answers
201 with the stored note and who added it; without a bearer it answers 401. GET /notes lists
the notes. POST /orders/<step> with a JSON body {orderId} records the step and answers 201,
except `ship`, which answers 503 (the compensation example); GET /orders lists the recorded
steps. It reads the token's subject without verifying the signature: Workflow verified
the caller's token before sending it, and this example only shows that the caller's own
bearer arrives. The token is never printed.
"""

from __future__ import annotations

import argparse
import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_PORT = 8790
_NOTES: list[dict[str, Any]] = []
_ORDER_CALLS: list[dict[str, str]] = []
# The order step that always fails: the compensation example's third write.
FAILING_STEP = "ship"
_LOCK = threading.Lock()


def subject_of(authorization: str | None) -> str | None:
    """The sub (or uid) claim of a bearer JWT, None when there is no bearer."""
    if not authorization or not authorization.lower().startswith("bearer "):
        return None
    token = authorization[7:].strip()
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    subject = claims.get("uid") or claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) and subject else None


class NotesHandler(BaseHTTPRequestHandler):
    """GET and POST /notes and /orders behind a bearer check."""

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _caller(self) -> str | None:
        caller = subject_of(self.headers.get("Authorization"))
        if caller is None:
            self._reply(401, {"error": "a bearer token is required"})
        return caller

    def do_GET(self) -> None:
        """List the notes, or the recorded order steps."""
        if self.path not in ("/notes", "/orders"):
            self._reply(404, {"error": "not found"})
        elif self._caller() is not None:
            with _LOCK:
                if self.path == "/notes":
                    self._reply(200, {"notes": list(_NOTES)})
                else:
                    self._reply(200, {"calls": list(_ORDER_CALLS)})

    def do_POST(self) -> None:
        """Store one note, or record one order step."""
        step = self.path.removeprefix("/orders/") if self.path.startswith("/orders/") else None
        if self.path != "/notes" and not step:
            self._reply(404, {"error": "not found"})
            return
        caller = self._caller()
        if caller is None:
            return
        body = self._body()
        if body is None:
            return
        if step:
            self._order_step(step, body)
            return
        if not body.get("claimId") or not body.get("note"):
            self._reply(400, {"error": "claimId and note are required"})
            return
        with _LOCK:
            note = {
                "noteId": len(_NOTES) + 1,
                "claimId": str(body["claimId"]),
                "note": str(body["note"]),
                "addedBy": caller,
            }
            _NOTES.append(note)
        self._reply(201, note)

    def _body(self) -> dict[str, Any] | None:
        """The request's JSON object; None (after answering 400) when it is not one."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._reply(400, {"error": "the body is not a JSON object"})
            return None
        return body

    def _order_step(self, step: str, body: dict[str, Any]) -> None:
        """Record one step of an order; the failing step records nothing."""
        if not body.get("orderId"):
            self._reply(400, {"error": "orderId is required"})
        elif step == FAILING_STEP:
            self._reply(503, {"error": f"{step} is unavailable"})
        else:
            call = {"step": step, "orderId": str(body["orderId"])}
            with _LOCK:
                _ORDER_CALLS.append(call)
            self._reply(201, call)

    def log_message(self, format: str, *args: Any) -> None:
        """One line per request, without headers (so no token is ever logged)."""
        print(f"backend: {self.command} {self.path} -> {args[1] if len(args) > 1 else ''}")


def serve(port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A started server (serve_forever on a daemon thread); call shutdown() to stop it."""
    server = ThreadingHTTPServer((host, port), NotesHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    """Run until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m examples.backend", description=__doc__)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), NotesHandler)
    print(f"claims backend on http://127.0.0.1:{port}/notes", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
