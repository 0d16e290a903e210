"""An MCP client for tests: both protocol eras over the in-process ASGI app, schema-checked."""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import jsonschema
from litestar import Litestar

from tests.support.shared import has_shared, shared_path

if TYPE_CHECKING:
    import pydantic

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def schema_path(version: str) -> str:
    """The MCP JSON schema of one protocol revision, relative to ../shared."""
    return f"mcp-spec/{version}/schema.json"


@functools.cache
def mcp_schema(version: str) -> dict[str, Any]:
    """The MCP JSON schema of one protocol revision, from ../shared/mcp-spec."""
    return json.loads(shared_path(schema_path(version)).read_text(encoding="utf-8"))


def assert_valid_with_sdk(definition: str, instance: Any) -> None:
    """Without ../shared, check a reply with the official SDK's protocol types instead.

    The model of the definition, and for the typed errors the code the schema pins. The SDK is
    imported here, not at the top: the conftest imports this module in every pytest process,
    and the SDK's types cost each about 0.6 s of CPU that a run with ../shared never uses.
    """
    from mcp import types

    models: dict[str, tuple[type[pydantic.BaseModel], int | None]] = {
        "JSONRPCErrorResponse": (types.JSONRPCError, None),
        "JSONRPCResultResponse": (types.JSONRPCResponse, None),
        "HeaderMismatchError": (types.JSONRPCError, -32020),
        "UnsupportedProtocolVersionError": (types.JSONRPCError, -32022),
        "ListToolsResult": (types.ListToolsResult, None),
        "CallToolResult": (types.CallToolResult, None),
        "InitializeResult": (types.InitializeResult, None),
        "DiscoverResult": (types.DiscoverResult, None),
    }
    model, code = models[definition]
    if model is types.JSONRPCError and "id" not in instance:
        # The schema lets an error that answers no readable request omit its id; the SDK not.
        assert instance["jsonrpc"] == "2.0" and set(instance) == {"jsonrpc", "error"}, instance
        types.ErrorData.model_validate(instance["error"])
    else:
        model.model_validate(instance)
    if code is not None:
        assert instance["error"]["code"] == code, instance


def assert_valid_mcp(version: str, definition: str, instance: Any) -> None:
    """Validate instance against a $defs entry of the MCP schema of that revision.

    The schema comes from ../shared/mcp-spec; without it the mcp package's types check it.
    """
    if has_shared(schema_path(version)):
        root = dict(mcp_schema(version))
        root["$ref"] = f"#/$defs/{definition}"
        jsonschema.Draft202012Validator(root).validate(instance)
        return
    assert_valid_with_sdk(definition, instance)


@dataclass
class McpReply:
    """An HTTP reply of /mcp and its decoded JSON body (None when empty)."""

    status: int
    headers: httpx.Headers
    body: Any

    @property
    def result(self) -> dict[str, Any]:
        """The JSON-RPC result (fails the test when the reply is an error)."""
        assert self.body is not None and "result" in self.body, self.body
        return dict(self.body["result"])

    @property
    def error(self) -> dict[str, Any]:
        """The JSON-RPC error (fails the test when the reply is a result)."""
        assert self.body is not None and "error" in self.body, self.body
        return dict(self.body["error"])


class McpTestClient:
    """Speaks one era to the app; every response is checked against that era's schema."""

    def __init__(self, http: httpx.AsyncClient, era: str, auth: dict[str, str]) -> None:
        self.http = http
        self.era = era
        self.auth = auth
        self._ids = itertools.count(1)

    def envelope_headers(self, method: str, name: str | None = None) -> dict[str, str]:
        """The headers a conforming client sends for this method."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers["MCP-Protocol-Version"] = self.era
        if self.era == MODERN:
            headers["Mcp-Method"] = method
            if name is not None:
                headers["Mcp-Name"] = name
        return headers

    def params_with_meta(self, params: dict[str, Any] | None) -> dict[str, Any]:
        """Params with the modern per-request envelope when speaking 2026-07-28."""
        merged = dict(params or {})
        if self.era == MODERN:
            merged["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"},
            }
        return merged

    async def post_raw(
        self, content: bytes | str, headers: dict[str, str], path: str = "/mcp"
    ) -> McpReply:
        """POST arbitrary bytes; the reply is returned unchecked."""
        response = await self.http.post(path, content=content, headers=headers)
        body = response.json() if response.content else None
        return McpReply(response.status_code, response.headers, body)

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        headers: dict[str, str] | None = None,
        with_auth: bool = True,
    ) -> McpReply:
        """Send one request and check the reply against the era's JSON-RPC schema."""
        name = params.get("name") if params and method == "tools/call" else None
        all_headers = self.envelope_headers(method, name)
        if with_auth:
            all_headers.update(self.auth)
        all_headers.update(headers or {})
        message = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": self.params_with_meta(params),
        }
        reply = await self.post_raw(json.dumps(message), all_headers)
        self.check(reply, method)
        return reply

    def check(self, reply: McpReply, method: str) -> None:
        """Validate a reply against the schema of this era."""
        assert "mcp-session-id" not in reply.headers
        if reply.body is None:
            return
        if "error" in reply.body:
            assert_valid_mcp(self.era, "JSONRPCErrorResponse", reply.body)
            return
        assert_valid_mcp(self.era, "JSONRPCResultResponse", reply.body)
        result_definition = {
            "tools/list": "ListToolsResult",
            "tools/call": "CallToolResult",
            "initialize": "InitializeResult",
            "server/discover": "DiscoverResult",
        }.get(method)
        if result_definition is not None:
            assert_valid_mcp(self.era, result_definition, reply.body["result"])

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """tools/call; returns the CallToolResult (fails on a JSON-RPC error)."""
        reply = await self.request(
            "tools/call", {"name": name, "arguments": arguments}, headers=headers
        )
        return reply.result


def asgi_client(app: Litestar) -> httpx.AsyncClient:
    """A client talking to the app over ASGI without leaving the event loop."""
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")
