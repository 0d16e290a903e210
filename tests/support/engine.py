"""Engine test doubles: the dsl-profile §7 stub port, an instant clock, definition builders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from runtime.engine import parse_definition
from runtime.engine.run import HttpRequest, HttpResponse, McpRequest

FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "definitions"
ERRORS = "https://serverlessworkflow.io/spec/1.0.0/errors/"


class StubPort:
    """The §7 stub: echo, status, flaky, risk and an MCP server with add and fail."""

    def __init__(self, risk_score: int = 25) -> None:
        self.risk_score = risk_score
        self.http_calls: list[HttpRequest] = []
        self.mcp_calls: list[McpRequest] = []
        self.flaky_hits = 0

    async def call_http(self, request: HttpRequest) -> HttpResponse:
        self.http_calls.append(request)
        path = urlsplit(request.uri).path
        if path.startswith("/echo/") and request.method == "POST":
            body = {
                "method": request.method,
                "seg": path.removeprefix("/echo/"),
                "query": request.query,
                "tag": request.headers.get("X-Tag"),
                "body": request.body,
            }
            return _json(200, body)
        if path.startswith("/status/"):
            code = int(path.removeprefix("/status/"))
            return _json(code, {"code": code})
        if path == "/flaky":
            self.flaky_hits += 1
            return _json(503, {}) if self.flaky_hits <= 2 else _json(200, {"ok": True})
        if path == "/risk/evaluate":
            return _json(200, {"riskScore": self.risk_score})
        return _json(404, {})

    async def call_mcp(self, request: McpRequest) -> dict[str, Any]:
        self.mcp_calls.append(request)
        if request.tool == "add":
            total = request.arguments["a"] + request.arguments["b"]
            return {"content": [], "structuredContent": {"sum": total}}
        return {"content": [{"type": "text", "text": "boom"}], "isError": True}


class InstantClock:
    """Records sleeps without waiting."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.time = 0.0

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.time += seconds


def _json(status: int, body: Any) -> HttpResponse:
    return HttpResponse(status, {"content-type": "application/json"}, json.dumps(body).encode())


HEADER = {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"}
OBJECT_WITH_OK = {"format": "json", "document": {"type": "object", "required": ["ok"]}}


def definition(do: list[Any], **extra: Any) -> Any:
    """A parsed definition with the given top-level tasks."""
    return parse_definition({"document": dict(HEADER), **extra, "do": do})
