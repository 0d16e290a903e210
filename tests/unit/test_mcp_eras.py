"""The protocol eras in the MCP layer: the 2026-07-28 envelope's checks; a body decoded once.

No database: McpServer over a tool that answers at once. The replies of both eras through the
app are checked against their MCP schemas by tests/integration/mcp.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest

from runtime.mcp import jsonrpc
from runtime.mcp.dispatch import ToolOutcome
from runtime.mcp.jsonrpc import DecodedBody, JsonRpcFault, decode_body, decoded_before
from runtime.mcp.protocol import Era, resolve_era
from runtime.mcp.server import McpServer
from tests.support.mcp import LEGACY, MODERN

VERSION = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
HEADERS = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "t"}


def _modern(meta: Any, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t",
            "_meta": meta, **params}}  # fmt: skip


def test_a_modern_envelope_of_any_mapping_resolves_as_one_of_dicts() -> None:
    meta = {VERSION: MODERN, CAPABILITIES: {"x": {}}}
    message = _modern(meta)
    assert resolve_era(message, HEADERS).client_capabilities == {"x": {}}
    proxied = MappingProxyType(
        {**message, "params": MappingProxyType({"name": "t", "_meta": MappingProxyType(meta)})}
    )
    era = resolve_era(proxied, HEADERS)
    assert era.era is Era.MODERN and era.client_capabilities == {"x": {}}


@pytest.mark.parametrize(
    ("message", "code", "text"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}, -32602,
         "params._meta must carry the protocol version and client capabilities"),
        (_modern([VERSION, CAPABILITIES]), -32602,
         "params._meta must carry the protocol version and client capabilities"),
        (_modern({CAPABILITIES: {}}), -32602,
         f"params._meta is missing {VERSION}"),
        (_modern({}), -32602,
         f"params._meta is missing {VERSION}, {CAPABILITIES}"),
        (_modern({VERSION: MODERN, CAPABILITIES: []}), -32602,
         "client capabilities must be an object"),
        (_modern({VERSION: "2025-11-25", CAPABILITIES: {}}), -32020,
         "MCP-Protocol-Version header does not match _meta"),
        (_modern({VERSION: MODERN, CAPABILITIES: {}}, name="u"), -32020,
         "Mcp-Name header does not match params.name"),
    ],
    ids=["params-not-object", "meta-not-object", "version-missing", "both-missing",
         "capabilities-not-object", "version-mismatch", "name-mismatch"],
)  # fmt: skip
def test_the_modern_envelope_refusals(message: dict[str, Any], code: int, text: str) -> None:
    with pytest.raises(JsonRpcFault) as caught:
        resolve_era(message, HEADERS)
    assert (caught.value.code, caught.value.message) == (code, text)


def test_a_decoding_is_handed_on_only_for_the_very_body_it_was_made_of() -> None:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    scope: dict[str, Any] = {}
    jsonrpc.remember_decoded(scope, body, {"decoded": True})
    assert decoded_before(scope, bytes(bytearray(body))) == DecodedBody(body, {"decoded": True})
    assert scope == {}  # taken: the scope does not keep the message
    jsonrpc.remember_decoded(scope, body, {"decoded": True})
    assert decoded_before(scope, body.replace(b"ping", b"pong")) is None
    assert decoded_before({}, body) is None


class _AnsweringTool:
    async def call(self, name: Any, arguments: Any, headers: Mapping[str, str]) -> ToolOutcome:
        return ToolOutcome({"status": "completed"}, False, '{"status":"completed"}')


class _NoPages:
    def page(self, cursor: Any, size: int) -> tuple[list[dict[str, Any]], str | None]:
        return [], None


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The texts jsonrpc's decoder decodes (every decode_body, whoever imported it)."""
    seen: list[str] = []
    decode = jsonrpc._DECODER.decode

    def counting(text: str) -> Any:
        seen.append(text)
        return decode(text)

    monkeypatch.setattr(jsonrpc._DECODER, "decode", counting)
    yield seen


def _call(era: str) -> tuple[bytes, dict[str, str]]:
    params: dict[str, Any] = {"name": "t", "arguments": {"a": 1}}
    headers = {"mcp-protocol-version": era}
    if era == MODERN:
        params["_meta"] = {VERSION: MODERN, CAPABILITIES: {}}
        headers |= {"mcp-method": "tools/call", "mcp-name": "t"}
    message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
    return json.dumps(message).encode(), headers


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_a_body_decoded_before_the_server_is_not_decoded_again(
    era: str, decodes: list[str]
) -> None:
    server = McpServer(_NoPages(), _AnsweringTool())
    body, headers = _call(era)
    alone = await server.handle_post(body, headers)
    assert len(decodes) == 1
    handed = await server.handle_post(body, headers, DecodedBody(body, decode_body(body)))
    assert len(decodes) == 2  # decode_body above; the server decoded nothing
    assert handed == alone and alone.status == 200
    result = alone.body["result"] if alone.body is not None else {}
    assert result["structuredContent"] == {"status": "completed"}
    assert ("resultType" in result) is (era == MODERN)
