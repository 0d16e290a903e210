"""A nested MCP call names, after initialize, the protocol version the server chose."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from runtime.engine.run import McpRequest
from runtime.execution.outbound.calls import send_mcp

pytestmark = pytest.mark.requirement("issue-42:compensation-through-the-gateway")

CHOSEN = "2025-11-25"


def _json(status: int, payload: Any) -> httpx.Response:
    # A stream the caller reads chunk by chunk, as from the wire.
    body = httpx.ByteStream(json.dumps(payload).encode())
    return httpx.Response(status, headers={"content-type": "application/json"}, stream=body)


def _server(seen: list[tuple[str, str]]) -> httpx.MockTransport:
    """Answers initialize with CHOSEN and refuses any later request naming another version,
    as the reference Gateway does."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        version = request.headers["mcp-protocol-version"]
        seen.append((body["method"], version))
        if body["method"] == "initialize":
            result = {"protocolVersion": CHOSEN, "capabilities": {}}
            return _json(200, {"jsonrpc": "2.0", "id": 1, "result": result})
        if version != CHOSEN:
            error = {"code": -32022, "message": "unsupported protocol version"}
            return _json(400, {"jsonrpc": "2.0", "error": error})
        if body["method"] == "notifications/initialized":
            return httpx.Response(202, stream=httpx.ByteStream(b""))
        result = {"content": [], "structuredContent": {"ok": True}}
        return _json(200, {"jsonrpc": "2.0", "id": 2, "result": result})

    return httpx.MockTransport(handle)


async def test_the_notification_and_the_call_name_the_version_initialize_answered() -> None:
    seen: list[tuple[str, str]] = []
    request = McpRequest(
        task="/do/0/undo", endpoint="http://gateway.test/mcp", tool="orders.release",
        arguments={}, protocol_version="2025-06-18", write=True,
    )  # fmt: skip
    async with httpx.AsyncClient(transport=_server(seen)) as client:
        result = await send_mcp(
            client, "http://gateway.test/mcp", request, {}, timeout_s=5.0,
            connect_timeout_s=1.0, max_bytes=65_536,
        )  # fmt: skip
    assert result["structuredContent"] == {"ok": True}
    assert seen == [
        ("initialize", "2025-06-18"),
        ("notifications/initialized", CHOSEN),
        ("tools/call", CHOSEN),
    ]
