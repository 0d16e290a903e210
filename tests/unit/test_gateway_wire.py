"""The Gateway's outbound poster: one pool for the process, connections kept and reused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from gateway.caller import Caller
from gateway.credentials import GatewayConfigurationError, StaticToken
from gateway.relay import WorkflowClient
from gateway.wire import JsonPoster, WireError
from runtime.security import SecretToken

pytestmark = pytest.mark.requirement("000:Gateway Changes")

ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}'


@dataclass
class Workflow:
    """A tiny HTTP/1.1 server: counts connections, records requests, answers ANSWER."""

    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    close_after_answer: bool = False
    # Requests (counted over all connections) read and then dropped without an answer.
    drop: frozenset[int] = frozenset()
    port: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                self.requests.append(head + await reader.readexactly(length))
                if len(self.requests) in self.drop:
                    break
                close = b"Connection: close\r\n" if self.close_after_answer else b""
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + close
                    + b"Content-Length: %d\r\n\r\n" % len(ANSWER)
                    + ANSWER
                )
                await writer.drain()
                if self.close_after_answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(workflow: Workflow) -> AsyncIterator[str]:
    server = await asyncio.start_server(workflow.serve, "127.0.0.1", 0)
    workflow.port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{workflow.port}/mcp"
    finally:
        server.close()
        await server.wait_closed()


async def test_sequential_posts_reuse_one_kept_alive_connection() -> None:
    workflow = Workflow()
    async with serving(workflow) as url:
        poster = JsonPoster(url, max_connections=4)
        for n in range(5):
            status, body = await poster.post(b'{"n":%d}' % n, {"X-N": str(n)}, timeout_s=5)
            assert (status, body) == (200, ANSWER)
        await poster.aclose()
    assert workflow.connections == 1
    assert len(workflow.requests) == 5
    first = workflow.requests[0]
    assert first.startswith(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"X-N: 0\r\n" in first and first.endswith(b'{"n":0}')


async def test_the_relay_client_is_made_once_and_reused_across_calls() -> None:
    # A client (a pool) per call would open a connection per call.
    workflow = Workflow()
    async with serving(workflow) as url:
        client = WorkflowClient(url, StaticToken("app.token.x"))
        caller = Caller("u", None, frozenset(), SecretToken("user.token.x"))
        for _ in range(3):
            assert await client.call_tool("workflow_get_status", {}, caller, timeout_s=5) == {
                "content": [],
                "isError": False,
            }
        await client.aclose()
    assert workflow.connections == 1
    sent = workflow.requests[-1]
    assert b"Authorization: Bearer user.token.x\r\n" in sent
    assert b"X-Scope-Token: Bearer app.token.x\r\n" in sent


async def test_concurrent_posts_open_connections_up_to_the_bound_only() -> None:
    workflow = Workflow()
    async with serving(workflow) as url:
        poster = JsonPoster(url, max_connections=3)
        answers = await asyncio.gather(*(poster.post(b"{}", {}, timeout_s=5) for _ in range(12)))
        await poster.aclose()
    assert all(answer == (200, ANSWER) for answer in answers)
    assert 1 <= workflow.connections <= 3


async def test_a_connection_the_server_closes_is_not_reused() -> None:
    workflow = Workflow(close_after_answer=True)
    async with serving(workflow) as url:
        poster = JsonPoster(url, max_connections=2)
        for _ in range(3):
            assert await poster.post(b"{}", {}, timeout_s=5) == (200, ANSWER)
        await poster.aclose()
    assert workflow.connections == 3


async def test_a_kept_connection_closed_under_a_request_is_retried_once_on_a_new_one() -> None:
    workflow = Workflow(drop=frozenset({2}))
    async with serving(workflow) as url:
        poster = JsonPoster(url, max_connections=2)
        assert await poster.post(b"{}", {}, timeout_s=5) == (200, ANSWER)
        assert await poster.post(b"{}", {}, timeout_s=5) == (200, ANSWER)
        await poster.aclose()
    assert workflow.connections == 2 and len(workflow.requests) == 3


async def test_a_new_connection_closed_without_an_answer_is_not_retried() -> None:
    workflow = Workflow(drop=frozenset({1, 2}))
    async with serving(workflow) as url:
        poster = JsonPoster(url, max_connections=2)
        with pytest.raises(WireError, match="RemoteProtocolError"):
            await poster.post(b"{}", {}, timeout_s=5)
        await poster.aclose()
    assert len(workflow.requests) == 1


async def test_nobody_listening_is_a_connect_error() -> None:
    workflow = Workflow()
    async with serving(workflow) as url:
        pass
    poster = JsonPoster(url, max_connections=1)
    with pytest.raises(WireError, match="ConnectError"):
        await poster.post(b"{}", {}, timeout_s=5)


async def test_a_header_value_with_a_line_break_is_never_sent() -> None:
    workflow = Workflow()
    async with serving(workflow) as url:
        poster = JsonPoster(url, max_connections=1)
        with pytest.raises(WireError, match="LocalProtocolError"):
            await poster.post(b"{}", {"traceparent": "x\r\nX-Evil: 1"}, timeout_s=5)
        await poster.aclose()
    assert workflow.requests == []


def test_a_workflow_url_that_is_not_http_is_a_configuration_error() -> None:
    with pytest.raises(GatewayConfigurationError, match="workflow_url"):
        WorkflowClient("ftp://workflow/mcp", StaticToken("t"))
