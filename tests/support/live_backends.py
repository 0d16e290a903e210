"""Local backends for the live suites, each served by uvicorn on its own thread and loop.

A service subprocess reaches them over TCP like any backend. They live on threads (not on the
test's event loop) so they keep answering while a test blocks, and a test can hold a request
at a backend until it says so: a run is then provably in flight, with no timing involved.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import uvicorn

from tests.support.execution import Receive, Send, free_port, read_body

START_LIMIT_S = 30.0
HOLD_LIMIT_S = 60.0  # a held request is answered after this even if the test never releases it


@dataclass
class Seen:
    """One request a backend received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class RecordingBackend:
    """ASGI app: records every request; HTTP answers {path, n}; POST /mcp speaks MCP tools/call.

    A request is held while a hold covers it: an HTTP path starting with the hold's key, or an
    MCP tools/call whose key is ``mcp:<tool name>``.
    """

    seen: list[Seen] = field(default_factory=list)
    _holds: dict[str, threading.Event] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hold(self, key: str) -> None:
        """Hold requests covered by key (a path, a URI of this backend, mcp:<tool>)."""
        with self._lock:
            self._holds[_path(key)] = threading.Event()

    def release(self, key: str) -> None:
        """Answer the held requests of key and every later one."""
        with self._lock:
            event = self._holds.pop(_path(key), None)
        if event is not None:
            event.set()

    def requests_to(self, prefix: str) -> list[Seen]:
        """The requests whose path starts with prefix (MCP calls: prefix ``mcp:<tool>``)."""
        return [seen for seen in list(self.seen) if _key_of(seen).startswith(_path(prefix))]

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        body = _json(raw)
        if scope["path"] == "/mcp" and not _is_tool_call(body):
            await self._mcp_handshake(body, send)
            return
        seen = Seen(scope["method"], scope["path"], headers, body)
        self.seen.append(seen)
        await self._wait_if_held(_key_of(seen))
        if scope["path"] == "/mcp":
            result = {"content": [], "structuredContent": {"n": len(self.seen)}}
            await _reply(send, 200, {"jsonrpc": "2.0", "id": body["id"], "result": result})
        else:
            await _reply(send, 200, {"path": scope["path"], "n": len(self.seen)})

    async def _wait_if_held(self, key: str) -> None:
        with self._lock:
            events = [event for prefix, event in self._holds.items() if key.startswith(prefix)]
        for event in events:
            await asyncio.to_thread(event.wait, HOLD_LIMIT_S)

    async def _mcp_handshake(self, message: Any, send: Send) -> None:
        if isinstance(message, dict) and message.get("method") == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {}}
            await _reply(send, 200, {"jsonrpc": "2.0", "id": message["id"], "result": result})
            return
        await _reply(send, 202, None)


def _path(key: str) -> str:
    return urlsplit(key).path if key.startswith(("http://", "https://")) else key


def _key_of(seen: Seen) -> str:
    if seen.path == "/mcp" and isinstance(seen.body, dict):
        return f"mcp:{seen.body.get('params', {}).get('name', '')}"
    return seen.path


def _is_tool_call(message: Any) -> bool:
    return isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


async def _reply(send: Send, status: int, payload: Any) -> None:
    body = b"" if payload is None else json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextmanager
def serving_on_thread(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free 127.0.0.1 port from a thread; yields its origin."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"backend-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_LIMIT_S
    while thread.is_alive() and not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError(f"the backend on port {port} did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@dataclass
class CountingApp:
    """Wraps an ASGI app and counts the HTTP requests that reach it, whatever the answer."""

    app: Any
    calls: int = 0

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.calls += 1
        await self.app(scope, receive, send)
