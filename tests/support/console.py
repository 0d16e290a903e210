"""A console client over plain HTTP (no browser): sign in, read pages, post forms like a page."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_OPERATION = re.compile(r'name="operationId" value="([^"]+)"')


def csrf_of(page: str) -> str:
    """The CSRF token of the first form of a page."""
    found = _CSRF.search(page)
    assert found is not None, "the page has no form with a CSRF token"
    return html.unescape(found.group(1))


def operation_of(page: str) -> str:
    """The operationId of the first form that carries one."""
    found = _OPERATION.search(page)
    assert found is not None, "the page has no form with an operationId"
    return found.group(1)


@dataclass
class ConsoleClient:
    """One person's console session over an httpx client (its own cookie jar)."""

    http: httpx.AsyncClient

    async def sign_in(self, token: str) -> httpx.Response:
        """Fill in and send the development sign-in form."""
        form = await self.http.get("/console/sign-in")
        assert form.status_code == 200, form.text
        return await self.http.post(
            "/console/sign-in", data={"csrf": csrf_of(form.text), "token": token}
        )

    async def get(self, path: str) -> httpx.Response:
        """A page."""
        return await self.http.get(path)

    async def submit(self, page_path: str, action: str, fields: dict[str, Any]) -> httpx.Response:
        """Post a form of page_path to action with the page's CSRF token and operationId."""
        page = (await self.http.get(page_path)).text
        data = {"csrf": csrf_of(page), **fields}
        if "operationId" not in data and _OPERATION.search(page):
            data["operationId"] = operation_of(page)
        return await self.http.post(action, data=data)


def console_client(app: Any) -> httpx.AsyncClient:
    """An httpx client on app over ASGI whose cookie jar keeps the console's session."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost")


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """app served over real HTTP on a free loopback port, in the current event loop; its URL."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    running = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(10):
            while not server.started:
                if running.done():
                    running.result()
                await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(running, 10)
