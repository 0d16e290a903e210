"""HTTP calls on the wire: redirects never repeat a write; a call ends within its budget."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from runtime.engine.run import EffectFailure, HttpRequest
from runtime.execution.outbound import send_http
from runtime.execution.targets import HttpPolicy
from tests.support.execution import Receive, Send, read_body, serving


@dataclass
class RedirectingServer:
    """Answers /write with a redirect (status chosen per test) and /next with 200."""

    redirect_status: int = 303
    drip_chunks: int = 0
    requests: list[tuple[str, str, bytes]] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        """The server's origin."""
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        self.requests.append((scope["method"], scope["path"], body))
        if scope["path"] == "/write":
            headers = [(b"location", b"/next"), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": self.redirect_status,
                        "headers": headers})  # fmt: skip
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["path"] == "/drip":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for _ in range(self.drip_chunks):
                # A deliberately slow backend (the thing under test): each chunk arrives well
                # inside httpx's per-read timeout, the whole body after it.
                await send({"type": "http.response.body", "body": b"x", "more_body": True})
                await asyncio.sleep(0.2)
            await send({"type": "http.response.body", "body": b"x"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(follow_redirects=False) as http:
        yield http


def _request(uri: str, method: str = "POST", body: Any = None) -> HttpRequest:
    return HttpRequest(
        task="t", method=method, uri=uri, headers={}, query={}, body=body, redirect=True,
        authentication=None, write=method not in ("GET", "HEAD"),
    )  # fmt: skip


def _policy(server: RedirectingServer) -> HttpPolicy:
    return HttpPolicy(targets=None, allowlist=(server.base + "/",), environment=None)


async def _send(
    client: httpx.AsyncClient, server: RedirectingServer, request: HttpRequest, timeout_s: float
) -> Any:
    return await send_http(
        client, request, _policy(server), timeout_s=timeout_s, connect_timeout_s=5,
        max_bytes=1 << 20, max_redirects=3,
    )  # fmt: skip


@pytest.mark.parametrize("status", [301, 302, 303])
async def test_a_post_answered_with_a_see_other_redirect_is_sent_once_then_followed_by_one_get(
    client: httpx.AsyncClient, status: int
) -> None:
    async with serving(RedirectingServer(redirect_status=status)) as server:  # type: ignore[arg-type]
        response = await _send(client, server, _request(server.base + "/write", body={"a": 1}), 10)
    assert response.status_code == 200
    assert server.requests == [("POST", "/write", b'{"a":1}'), ("GET", "/next", b"")]


async def test_a_post_answered_with_307_keeps_its_method_and_body(
    client: httpx.AsyncClient,
) -> None:
    async with serving(RedirectingServer(redirect_status=307)) as server:  # type: ignore[arg-type]
        await _send(client, server, _request(server.base + "/write", body={"a": 1}), 10)
    assert server.requests == [("POST", "/write", b'{"a":1}'), ("POST", "/next", b'{"a":1}')]


async def test_a_server_dripping_its_body_cannot_hold_a_call_past_its_total_budget(
    client: httpx.AsyncClient,
) -> None:
    async with serving(RedirectingServer(drip_chunks=50)) as server:  # type: ignore[arg-type]
        with pytest.raises(EffectFailure, match="timed out"):
            # The per-read timeout (1 s) never fires: only the whole-call bound can stop it.
            await _send(client, server, _request(server.base + "/drip", method="GET"), 1.0)
