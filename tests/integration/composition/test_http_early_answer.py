"""The HTTP protocol that hands each POST, once read, to an early answer before the app.

Real uvicorn on loopback, raw sockets: what a client sees on the wire (one answer per request,
in order, keep-alive kept) whether the hook answers a request or the app does, and the cases
left to the app untouched (other methods, 100-continue, bodies past the read-ahead bound, a
connection lost mid-body).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from runtime.composition.http_protocol import answering
from tests.support.execution import on_free_port

EARLY = b'{"early":true}'


@dataclass
class Recorder:
    """The hook (answers a body of b"refuse") and the app (echoes the body), both recording."""

    judged: list[bytes] = field(default_factory=list)
    served: list[bytes] = field(default_factory=list)
    port: int = 0

    def early_answer(self, scope: MutableMapping[str, Any], body: bytes) -> bytes | None:
        self.judged.append(body)
        if body == b"raise":
            raise RuntimeError("the hook failed")
        scope["test.judged"] = True
        return EARLY if body == b"refuse" else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.served.append(body)
        # What the hook left in the scope reaches the app.
        reply = (b"judged:" if scope.get("test.judged") else b"app:") + body[:20]
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(reply))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": reply})


@pytest.fixture
async def served() -> AsyncIterator[Recorder]:
    recorder = Recorder()
    async with on_free_port(recorder, http=answering(recorder.early_answer)) as port:
        recorder.port = port
        yield recorder


def post(body: bytes, *, version: str = "1.1", extra: str = "") -> bytes:
    head = f"POST /mcp HTTP/{version}\r\nHost: x\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


async def read_answer(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)).decode()
    status, *lines = head.strip().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    body = await reader.readexactly(int(headers["content-length"]))
    return status, headers, body


async def test_a_post_the_hook_answers_never_reaches_the_app_and_the_connection_goes_on(
    served: Recorder,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(post(b"refuse"))
    status, headers, body = await read_answer(reader)
    assert (status, body) == ("HTTP/1.1 200 OK", EARLY)
    assert headers["content-type"] == "application/json" and "date" in headers
    assert "connection" not in headers
    # The same connection serves the next request, which the hook lets through.
    writer.write(post(b"hello"))
    assert (await read_answer(reader))[2] == b"judged:hello"
    assert served.judged == [b"refuse", b"hello"] and served.served == [b"hello"]
    writer.close()


async def test_the_hook_sees_the_whole_body_of_a_post_sent_in_pieces(served: Recorder) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    message = post(b"piece-one|piece-two|piece-three")
    for start in range(0, len(message), 25):
        writer.write(message[start : start + 25])
        await writer.drain()
        await asyncio.sleep(0.02)
    assert (await read_answer(reader))[2] == b"judged:piece-one|piece-two|"
    assert served.judged == [b"piece-one|piece-two|piece-three"]
    assert served.served == served.judged
    writer.close()


async def test_pipelined_posts_are_answered_in_their_order(served: Recorder) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(post(b"refuse") + post(b"second") + post(b"refuse") + post(b"fourth"))
    answers = [(await read_answer(reader))[2] for _ in range(4)]
    assert answers == [EARLY, b"judged:second", EARLY, b"judged:fourth"]
    assert served.served == [b"second", b"fourth"]
    writer.close()


async def test_a_body_past_the_read_ahead_bound_goes_to_the_app_unjudged(served: Recorder) -> None:
    big = b"x" * 300_000
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(post(big))
    assert (await read_answer(reader))[2] == b"app:" + big[:20]
    assert served.judged == [] and served.served == [big]
    writer.close()


async def test_a_post_expecting_100_continue_goes_to_the_app(served: Recorder) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    body = b"refuse"
    writer.write(post(body, extra="Expect: 100-continue\r\n").removesuffix(body))
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert interim.startswith(b"HTTP/1.1 100 Continue")
    writer.write(body)
    assert (await read_answer(reader))[2] == b"app:refuse"
    assert served.judged == []
    writer.close()


async def test_other_methods_are_not_judged(served: Recorder) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(b"GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await read_answer(reader))[2] == b"app:"
    assert served.judged == []
    writer.close()


async def test_a_connection_lost_mid_body_starts_nothing(served: Recorder) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(post(b"refuse-this-body")[:-5])
    await writer.drain()
    writer.close()
    await asyncio.sleep(0.1)
    # The server goes on serving.
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(post(b"after"))
    assert (await read_answer(reader))[2] == b"judged:after"
    assert served.judged == [b"after"] and served.served == [b"after"]
    writer.close()


async def test_an_http_1_0_answer_closes_its_connection(served: Recorder) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(post(b"refuse", version="1.0"))
    _, headers, body = await read_answer(reader)
    assert body == EARLY and headers["connection"] == "close"
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_a_hook_that_raises_leaves_the_request_to_the_app(served: Recorder) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    writer.write(post(b"raise"))
    assert (await read_answer(reader))[2] == b"app:raise"
    writer.write(post(b"refuse"))
    assert (await read_answer(reader))[2] == EARLY
    writer.close()


async def test_a_chunked_post_and_an_empty_post_are_judged_whole(served: Recorder) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    head = b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    writer.write(head + b"3\r\nref\r\n")
    await writer.drain()
    await asyncio.sleep(0.05)
    writer.write(b"3\r\nuse\r\n0\r\n\r\n")
    assert (await read_answer(reader))[2] == EARLY
    writer.write(post(b""))
    assert (await read_answer(reader))[2] == b"judged:"
    assert served.judged == [b"refuse", b""] and served.served == [b""]
    writer.close()
