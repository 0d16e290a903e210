"""Shared pieces of the execution tests (no tests here): a local HTTP/MCP server, workers."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import uvicorn

from runtime.addresses import LOOPBACK_NETWORKS, AddressPolicy
from runtime.execution import WorkflowRuntime
from runtime.scheduler import Executor, SchedulerSettings
from tests.support.processes import worker_command
from tests.support.waiting import wait_until

HEADER = {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"}
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def document(do: list[Any], **extra: Any) -> dict[str, Any]:
    """A definition document with the given top-level tasks."""
    return {"document": dict(HEADER), **extra, "do": do}


def set_tasks(count: int) -> list[Any]:
    """count set tasks, each adding its index to the data."""
    return [{f"s{i}": {"set": {"step": i, "seen": f"${{ .seen + {i} }}"}}} for i in range(count)]


@dataclass
class LocalServer:
    """A tiny ASGI app on 127.0.0.1: counts requests, answers slowly or with a status."""

    delay_s: float = 0.0
    status: int = 200
    requests: list[dict[str, Any]] = field(default_factory=list)
    completed: int = 0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    on_tool_call: Callable[[], Awaitable[None]] | None = None
    port: int = 0

    @property
    def base(self) -> str:
        """The server's origin."""
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        entry = {"method": scope["method"], "path": scope["path"], "headers": headers}
        if scope["path"] == "/mcp":
            await self._mcp(json.loads(body or b"{}"), headers, send)
            return
        self.requests.append(entry)
        # A deliberately slow backend when delay_s is set (timeouts and cancellation are tested).
        await asyncio.sleep(self.delay_s)
        self.completed += 1
        await _reply(send, self.status, {"ok": self.status < 400, "path": scope["path"]})

    async def _mcp(self, message: dict[str, Any], headers: dict[str, str], send: Send) -> None:
        method = message.get("method")
        if method == "initialize":
            result: dict[str, Any] = {"protocolVersion": "2025-06-18", "capabilities": {}}
            await _reply(send, 200, {"jsonrpc": "2.0", "id": message["id"], "result": result})
            return
        if "id" not in message:
            await _reply(send, 202, None)
            return
        self.tool_calls.append({"params": message["params"], "headers": headers})
        if self.on_tool_call is not None:
            await self.on_tool_call()
        result = {"content": [], "structuredContent": {"n": len(self.tool_calls)}}
        await _reply(send, 200, {"jsonrpc": "2.0", "id": message["id"], "result": result})


async def read_body(receive: Receive) -> bytes:
    """The whole request body of an ASGI HTTP request."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _reply(send: Send, status: int, payload: Any) -> None:
    body = b"" if payload is None else json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Servable(Protocol):
    """An ASGI app that is told the port it is served on."""

    port: int

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None: ...


App = TypeVar("App", bound=Servable)


@asynccontextmanager
async def serving(app: App) -> AsyncIterator[App]:
    """Serve app with uvicorn on a free 127.0.0.1 port for the duration."""
    async with on_free_port(app) as port:
        app.port = port
        yield app


@asynccontextmanager
async def on_free_port(app: Any, **options: Any) -> AsyncIterator[int]:
    """Serve any ASGI app with uvicorn (options: more uvicorn.Config) on a free 127.0.0.1 port."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **options
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await wait_until(lambda: server.started, what="the local server listening")
    try:
        yield port
    finally:
        server.should_exit = True
        await task


# The test configuration of in-process runtimes: local backends listen on loopback.
LOCAL_BACKENDS = AddressPolicy.from_cidrs(LOOPBACK_NETWORKS)

FAST = SchedulerSettings(
    lease_ms=600, renew_interval_ms=150, reap_interval_ms=150, sweep_interval_ms=150,
    poll_interval_ms=100, reclaim_min_remaining_ms=100,
)  # fmt: skip


@asynccontextmanager
async def executor(db: Any, runtime: WorkflowRuntime) -> AsyncIterator[Executor]:
    """An in-process executor running the workflow handler."""
    async with Executor(db, runtime.handlers(), FAST) as running:
        yield running
    await runtime.aclose()


@asynccontextmanager
async def worker_process(
    database_url: str,
    name: str,
    *,
    faults: str = "",
    settings: dict[str, Any] | None = None,
    lease_ms: int = 600,
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A real worker process running the workflow handler, yielded once ready.

    Its leases are short (lease_ms) so that a killed worker's task is reclaimed within a
    test; a worker whose own tasks must not be reclaimed on a loaded machine takes longer ones.
    """
    env = dict(os.environ, WORKFLOW_FAULTS=faults)
    # The test configuration: local backends listen on loopback.
    env["WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_NETWORKS"] = json.dumps(LOOPBACK_NETWORKS)
    for key, value in (settings or {}).items():
        variable = f"WORKFLOW_EXECUTION_OUTBOUND_{key.upper()}"
        env[variable] = value if isinstance(value, str) else json.dumps(value)
    args = [
        "--database-url", database_url, "--worker-id", name,
        "--lease-ms", str(lease_ms), "--renew-interval-ms", "150", "--reap-interval-ms", "150",
        "--poll-interval-ms", "200",
    ]  # fmt: skip
    async with worker_command(args, env) as proc:
        yield proc
