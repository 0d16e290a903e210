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

    def early_answer(
        self, scope: MutableMapping[str, Any], body: bytes
    ) -> tuple[bytes, int] | None:
        self.judged.append(body)
        if body == b"raise":
            raise RuntimeError("the hook failed")
        scope["test.judged"] = True
        if body.startswith(b"come-back:"):
            # A refusal telling its client to come back in that many milliseconds.
            return EARLY, int(body.removeprefix(b"come-back:"))
        return (EARLY, 0) if body == b"refuse" else None

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


async def _answer_after(reader: asyncio.StreamReader, began: float) -> tuple[bytes, float]:
    body = (await read_answer(reader))[2]
    return body, asyncio.get_running_loop().time() - began


@pytest.mark.requirement("001:Capacity And Availability")
async def test_a_client_refused_again_before_its_retry_is_up_gets_the_answer_no_sooner(
    served: Recorder,
) -> None:
    # The impatient client: refused, it sends again at once and is refused again. The second
    # refusal comes when the first one told it to come back, not at once.
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    began = loop.time()
    writer.write(post(b"come-back:600"))
    first, _ = await _answer_after(reader, began)
    writer.write(post(b"come-back:600"))
    second, waited = await _answer_after(reader, began)
    assert first == second == EARLY
    assert waited >= 0.6
    # A request let through is never held, whatever the client was told.
    writer.write(post(b"come-back:5000") + post(b"hello"))
    third, _ = await _answer_after(reader, began)
    assert third == EARLY
    writer.close()


async def test_a_held_refusal_holds_only_its_own_connection(served: Recorder) -> None:
    loop = asyncio.get_running_loop()
    impatient_reader, impatient = await asyncio.open_connection("127.0.0.1", served.port)
    impatient.write(post(b"come-back:5000"))
    await read_answer(impatient_reader)
    impatient.write(post(b"come-back:5000"))  # held for five seconds
    other_reader, other = await asyncio.open_connection("127.0.0.1", served.port)
    began = loop.time()
    other.write(post(b"come-back:5000"))
    body, waited = await _answer_after(other_reader, began)
    assert body == EARLY and waited < 4.0
    assert not impatient_reader.at_eof() and len(served.judged) == 3
    impatient.close()
    other.close()


async def test_pipelined_requests_behind_a_held_refusal_are_answered_after_it(
    served: Recorder,
) -> None:
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    began = loop.time()
    writer.write(post(b"come-back:500") + post(b"come-back:500") + post(b"hello"))
    answers = [await _answer_after(reader, began) for _ in range(3)]
    assert [body for body, _ in answers] == [EARLY, EARLY, b"judged:hello"]
    assert answers[1][1] >= 0.5 and answers[2][1] >= answers[1][1]
    writer.close()
