"""A lean HTTP/1.1 client for the Gateway's one kind of outbound call: a JSON POST to Workflow.

httpx (httpcore, h11, anyio) cost the Gateway about a third of its CPU per relayed call
(docs/PERFORMANCE.md "The Gateway's own cost"). This client does only what the relay needs:
keep-alive connections to one origin, reused last-in first-out, at most `max_connections` at
once; each request written in one `write` (no Nagle wait on a split request) and its answer
parsed by httptools (the parser uvicorn uses). No redirects, no proxies from the environment,
no cookies. TLS uses httpx's default context, so trust is what it was with httpx.

Every failure to get a complete answer raises WireError named like httpx's exceptions
(ConnectError, ReadTimeout, ReadError, RemoteProtocolError, LocalProtocolError), which the
relay reports as WORKFLOW_INVOCATION_UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from typing import cast
from urllib.parse import urlsplit

import httptools
import httpx

# An idle connection older than this is closed rather than reused: httpx's keep-alive expiry,
# which docs/OPERATIONS.md tells operators to keep Workflow's keep-alive above.
IDLE_LIMIT_S = 5.0


class WireError(Exception):
    """No complete HTTP answer; the message is the failure's kind (httpx's spelling)."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection carrying one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._body: list[bytes] = []
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self._received = False
        self._reusable = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail("RemoteProtocolError")
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail("ReadError" if self._received else "RemoteProtocolError")

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._reusable = self._parser.should_keep_alive()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result((self._parser.get_status_code(), b"".join(self._body)))

    def _fail(self, kind: str) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(WireError(kind))

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        """Write request, wait for the whole answer: (status, body)."""
        assert self.transport is not None
        self._body, self._received, self._reusable = [], False, False
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self._waiter

    @property
    def reusable(self) -> bool:
        """Whether the last answer left the connection open for another request."""
        return self._reusable and not self.closed

    @property
    def answered_nothing(self) -> bool:
        """No byte of an answer arrived (a reused connection the server had closed)."""
        return not self._received

    def close(self) -> None:
        """Close now (an answer still awaited fails)."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class JsonPoster:
    """POSTs JSON bodies to one URL over a bounded pool of keep-alive connections."""

    def __init__(self, url: str, *, max_connections: int) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._host = parts.hostname
        self._tls = parts.scheme == "https"
        self._port = parts.port or (443 if self._tls else 80)
        self._ssl: ssl.SSLContext | None = httpx.create_ssl_context() if self._tls else None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._head = f"POST {target} HTTP/1.1\r\nHost: {parts.netloc}\r\n".encode("ascii")
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False

    async def post(
        self, body: bytes, headers: Mapping[str, str], *, timeout_s: float
    ) -> tuple[int, bytes]:
        """(status, body) of one POST, within timeout_s in all (WireError otherwise)."""
        for value in headers.values():
            if "\r" in value or "\n" in value:
                # Never sent (it would split the request); httpx's name for what it refused.
                raise WireError("LocalProtocolError")
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        request = b"".join(
            (self._head, lines.encode("latin-1"), b"Content-Length: %d\r\n\r\n" % len(body), body)
        )
        try:
            async with asyncio.timeout(timeout_s):
                async with self._slots:
                    return await self._send(request)
        except TimeoutError:
            raise WireError("ReadTimeout") from None

    async def _send(self, request: bytes) -> tuple[int, bytes]:
        connection, reused = self._take(), True
        if connection is None:
            connection, reused = await self._connect(), False
        try:
            answer = await connection.exchange(request)
        except WireError:
            connection.close()
            if not (reused and connection.answered_nothing):
                raise
            # The server closed the idle connection as we wrote: once more on a new one.
            connection = await self._connect()
            try:
                answer = await connection.exchange(request)
            except BaseException:
                connection.close()
                raise
        except BaseException:
            connection.close()  # cancelled or timed out mid-answer: never reused
            raise
        self._give_back(connection)
        return answer

    def _take(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and now - connection.idle_since < IDLE_LIMIT_S:
                return connection
            connection.close()
        return None

    def _give_back(self, connection: _Connection) -> None:
        if self._closed or not connection.reusable:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self._idle.append(connection)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                _Connection,
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host if self._tls else None,
            )
        except ssl.SSLError:
            raise WireError("ConnectError") from None
        except OSError:
            raise WireError("ConnectError") from None
        return connection

    async def aclose(self) -> None:
        """Close every idle connection; connections in use close when their call ends."""
        self._closed = True
        while self._idle:
            self._idle.pop().close()
