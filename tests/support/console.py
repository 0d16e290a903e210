"""A console client over plain HTTP (no browser): sign in, read pages, post forms like a page."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import httpx
import uvicorn

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_OPERATION = re.compile(r'name="operationId" value="([^"]+)"')


class _Forms(HTMLParser):
    """Each form's action, the formactions of its buttons, and its hidden inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[set[str], dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Note a form, a button's formaction, or a hidden input of the current form."""
        found = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.forms.append(({found.get("action", "")}, {}))
        elif self.forms and tag == "button" and "formaction" in found:
            self.forms[-1][0].add(found["formaction"])
        elif self.forms and tag == "input" and found.get("type") == "hidden":
            self.forms[-1][1][found.get("name", "")] = found.get("value", "")


def hidden_fields(page: str, action: str) -> dict[str, str]:
    """The hidden inputs of the page's form that posts to action."""
    parser = _Forms()
    parser.feed(page)
    for actions, hidden in parser.forms:
        if action in actions:
            return hidden
    raise AssertionError(f"the page has no form posting to {action}")


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
        """Post the form of page_path whose action (or a button's formaction) is action: its
        hidden fields (CSRF token, operationId, pinned digests) with fields over them."""
        page = (await self.http.get(page_path)).text
        return await self.http.post(action, data={**hidden_fields(page, action), **fields})


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
