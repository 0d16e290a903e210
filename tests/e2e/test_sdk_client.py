"""End to end with the official MCP Python SDK client against the real server, in both eras.

The SDK validates every result against its own types; a recording HTTP transport keeps the
raw JSON the server sent so the tests can check that what the SDK hands back is that JSON.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from generated.routes import ROUTES
from handlers import HANDLERS
from runtime.canonical import definition_digest
from runtime.mcp.tools import ToolRegistry
from tests.support.publication import definition_text, new_id, save_args
from tests.support.server import LIVE_PAGE_SIZE, LiveServer

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
FOREIGN_HOST = "00000000-0000-4000-8000-000000000001"
SERVED = ToolRegistry(ROUTES, HANDLERS).names
# As the SDK's default client (create_mcp_http_client), but a hung server fails the test sooner.
TIMEOUT = httpx2.Timeout(30.0, read=60.0)


@dataclass
class Exchange:
    """One HTTP round trip as seen on the wire."""

    method: str
    request_headers: httpx2.Headers
    request_body: Any
    status: int
    response_body: Any


@dataclass
class RecordingTransport(httpx2.AsyncBaseTransport):
    """Passes requests to the network and keeps each JSON request/response pair."""

    inner: httpx2.AsyncBaseTransport = field(default_factory=httpx2.AsyncHTTPTransport)
    exchanges: list[Exchange] = field(default_factory=list)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Forward the request and record the JSON bodies."""
        response = await self.inner.handle_async_request(request)
        content = await response.aread()
        self.exchanges.append(
            Exchange(
                method=request.method,
                request_headers=request.headers,
                request_body=_json_or_none(request.content),
                status=response.status_code,
                response_body=_json_or_none(content),
            )
        )
        return httpx2.Response(
            response.status_code, headers=response.headers, content=content, request=request
        )

    async def aclose(self) -> None:
        """Close the network transport."""
        await self.inner.aclose()

    def results_of(self, rpc_method: str) -> list[dict[str, Any]]:
        """The raw JSON-RPC results the server sent for one method, in order."""
        return [
            exchange.response_body["result"]
            for exchange in self.exchanges
            if isinstance(exchange.request_body, dict)
            and exchange.request_body.get("method") == rpc_method
            and isinstance(exchange.response_body, dict)
            and "result" in exchange.response_body
        ]


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content) if content else None
    except ValueError:
        return None


@dataclass
class Connection:
    """An SDK client connected in one era, with the wire recording behind it."""

    client: Client
    wire: RecordingTransport
    era: str


@asynccontextmanager
async def connect(server: LiveServer, era: str) -> AsyncIterator[Connection]:
    """The SDK client in one era: 'auto' probes server/discover, 'legacy' initializes.

    A context manager, not a fixture: the SDK's task groups must be entered and left in the
    same task, and pytest-asyncio runs fixture setup and teardown in different ones.
    """
    wire = RecordingTransport()
    headers = server.auth_headers(roles=("workflow-admin",))
    async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT, transport=wire) as http:
        transport = streamable_http_client(server.mcp_url, http_client=http)
        mode = "auto" if era == MODERN else "legacy"
        async with Client(transport, mode=mode) as client:
            yield Connection(client, wire, era)


@pytest.fixture(params=[MODERN, LEGACY])
def era(request: pytest.FixtureRequest) -> str:
    """Each protocol era in turn."""
    return str(request.param)


def dumped(model: Any) -> dict[str, Any]:
    """An SDK model as wire JSON."""
    return dict(model.model_dump(by_alias=True, mode="json", exclude_none=True))


async def list_all_tools(client: Client) -> tuple[list[types.Tool], int]:
    """Every tool, following next_cursor; also how many pages it took."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        pages += 1
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools, pages


async def test_the_client_negotiates_the_era_it_asked_for(
    live_server: LiveServer, era: str
) -> None:
    async with connect(live_server, era) as connection:
        client = connection.client
        session = client.session
        assert client.protocol_version == era
        discovered = session.discover_result
        initialized = session.initialize_result
    if era == MODERN:
        assert discovered is not None and MODERN in discovered.supported_versions
        assert discovered.capabilities.tools is not None
        [raw] = connection.wire.results_of("server/discover")
        assert dumped(discovered)["supportedVersions"] == raw["supportedVersions"]
        assert dumped(discovered)["capabilities"] == raw["capabilities"]
        assert connection.wire.results_of("initialize") == []
    else:
        assert initialized is not None
        assert connection.wire.results_of("server/discover") == []
        [raw] = connection.wire.results_of("initialize")
        assert raw["protocolVersion"] == LEGACY
        assert initialized.server_info.name == raw["serverInfo"]["name"]


async def test_tools_list_pages_through_every_served_tool(
    live_server: LiveServer, era: str
) -> None:
    async with connect(live_server, era) as connection:
        tools, pages = await list_all_tools(connection.client)
    assert [tool.name for tool in tools] == SERVED
    assert pages == -(-len(SERVED) // LIVE_PAGE_SIZE)
    raw_pages = connection.wire.results_of("tools/list")
    raw_tools = [tool for page in raw_pages for tool in page["tools"]]
    assert [tool["name"] for tool in raw_tools] == SERVED
    for tool, raw in zip(tools, raw_tools, strict=True):
        assert tool.input_schema == raw["inputSchema"]
        assert tool.output_schema == raw["outputSchema"]
        assert dumped(tool)["annotations"] == raw["annotations"]


async def test_a_valid_save_returns_its_receipt_as_structured_content(
    live_server: LiveServer, era: str
) -> None:
    wf_def_id = new_id()
    arguments = save_args(wf_def_id, 3, definition=definition_text(3))
    async with connect(live_server, era) as connection:
        result = await connection.client.call_tool("workflow_definition_save", arguments)
    assert result.is_error is False
    assert result.structured_content == {
        "result": "saved",
        "wfDefId": wf_def_id,
        "appliedRevision": 3,
        "definitionDigest": definition_digest(definition_text(3)),
        "active": True,
    }
    [raw] = connection.wire.results_of("tools/call")
    assert raw["isError"] is False
    assert raw["structuredContent"] == result.structured_content
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == result.structured_content


async def test_a_save_for_another_host_is_denied_as_a_tool_error(
    live_server: LiveServer, era: str
) -> None:
    arguments = save_args(new_id(), 1, host_id=FOREIGN_HOST)
    async with connect(live_server, era) as connection:
        result = await connection.client.call_tool("workflow_definition_save", arguments)
    assert result.is_error is True
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert error["code"] == "WORKFLOW_POLICY_DENIED"
    assert error["retryable"] is False
    [raw] = connection.wire.results_of("tools/call")
    assert raw["isError"] is True
    assert raw["structuredContent"] == result.structured_content


async def test_every_request_carries_both_bearers(live_server: LiveServer, era: str) -> None:
    async with connect(live_server, era) as connection:
        await list_all_tools(connection.client)
        await connection.client.call_tool("workflow_definition_save", save_args(new_id(), 1))
    posts = [exchange for exchange in connection.wire.exchanges if exchange.method == "POST"]
    assert len(posts) >= 2
    for exchange in posts:
        assert exchange.request_headers["authorization"].startswith("Bearer ")
        assert exchange.request_headers["x-scope-token"].startswith("Bearer ")
        assert exchange.status in (200, 202)
