"""The console through the Gateway (issue 39): /console/* relayed to Workflow as it is.

A person who reaches Workflow only through the Gateway reaches its console here. The relay
adds nothing and decides nothing: Workflow's console signs people in, checks every form's CSRF
token and origin, and calls the tools. The browser's Host goes along (and X-Forwarded-Proto),
so the console's same-origin check and its cookies see the origin the browser sees. Bearers the
browser might send are not relayed: the console reads its session cookie only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

PREFIX = "/console"
MAX_BODY_BYTES = 1024 * 1024
TIMEOUT_S = 30.0
# Hop-by-hop headers (RFC 9110 7.6.1) and what the relay sets itself.
_DROPPED_REQUEST = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
        "trailer", "transfer-encoding", "upgrade", "content-length", "authorization",
        "x-scope-token", "x-forwarded-proto",
    }
)  # fmt: skip
_DROPPED_RESPONSE = frozenset(
    {
        "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
        "content-length", "content-encoding",
    }
)  # fmt: skip

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def console_origin(workflow_url: str) -> str:
    """Workflow's origin (scheme and authority) from its MCP URL."""
    parts = urlsplit(workflow_url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


class ConsoleRelay:
    """Relays one /console request to Workflow and its answer back, unchanged."""

    def __init__(
        self, workflow_url: str, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._origin = console_origin(workflow_url)
        self._transport = transport
        # Made on the first relayed request: a Gateway nobody opens the console through holds
        # no client.
        self._http: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        """Close the relay's connections."""
        if self._http is not None:
            await self._http.aclose()

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                transport=self._transport, timeout=TIMEOUT_S, trust_env=False
            )
        return self._http

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI HTTP request under /console."""
        body = await _body(receive)
        if body is None:
            await _answer(send, 413, [], b"request body too large")
            return
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in scope["headers"]
            if name.decode("latin-1").lower() not in _DROPPED_REQUEST
        ]
        headers.append(("x-forwarded-proto", str(scope.get("scheme", "http"))))
        # The mount hands on a path without its prefix: the request's own path is raw_path.
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else PREFIX + scope["path"]
        if not path.startswith(PREFIX):
            await _answer(send, 404, [], b"not found")
            return
        query = scope.get("query_string", b"").decode("latin-1")
        url = f"{self._origin}{path}" + (f"?{query}" if query else "")
        try:
            answer = await self._client().request(
                scope["method"], url, headers=headers, content=body
            )
        except httpx.HTTPError:
            await _answer(send, 502, [], b"the workflow console could not be reached")
            return
        kept = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in answer.headers.multi_items()
            if name.lower() not in _DROPPED_RESPONSE
        ]
        await _answer(send, answer.status_code, kept, answer.content)


async def _body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode("ascii"))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
