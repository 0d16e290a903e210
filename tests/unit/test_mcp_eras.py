"""The protocol eras in the MCP layer: the 2026-07-28 envelope's checks.

The replies of both eras through the app are checked against their MCP schemas by
tests/integration/mcp.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from runtime.mcp.jsonrpc import JsonRpcFault
from runtime.mcp.protocol import Era, resolve_era
from tests.support.mcp import MODERN

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
