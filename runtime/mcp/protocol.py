"""The two protocol eras served from one endpoint and how a request is assigned to one."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from runtime.mcp.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    UNSUPPORTED_PROTOCOL_VERSION,
    JsonRpcFault,
)

MODERN_VERSION = "2026-07-28"
LEGACY_VERSION = "2025-11-25"
# Revisions that negotiate with an initialize handshake; a request naming one of these in
# MCP-Protocol-Version is served by the legacy path (we answer with 2025-11-25 semantics).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", LEGACY_VERSION)
SUPPORTED_VERSIONS = (MODERN_VERSION, LEGACY_VERSION)

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
# Methods whose named parameter is mirrored in the Mcp-Name header.
_NAME_BEARING = {
    "tools/call": "name",
    # The tasks extension: Mcp-Name carries params.taskId (routing to the task's holder).
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


class Era(enum.Enum):
    """A protocol era: the stateless per-request envelope, or the initialize handshake."""

    MODERN = MODERN_VERSION
    LEGACY = LEGACY_VERSION


@dataclass(frozen=True)
class EraContext:
    """The era a request is served in and the client capabilities it declared."""

    era: Era
    client_capabilities: Mapping[str, Any]


def resolve_era(message: Mapping[str, Any], headers: Mapping[str, str]) -> EraContext:
    """Assign a decoded request to an era, enforcing the modern envelope and header rules."""
    version_header = headers.get(VERSION_HEADER)
    if version_header is None or version_header in HANDSHAKE_VERSIONS:
        # A handshake revision we do not serve after initialize: the 2025-11-25
        # transport answers an unsupported MCP-Protocol-Version with 400.
        served = version_header in (None, LEGACY_VERSION)
        if not served and message.get("method") != "initialize":
            raise _unsupported(str(version_header))
        return EraContext(Era.LEGACY, {})
    return EraContext(Era.MODERN, _check_modern_envelope(message, headers))


def _is_object(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # A decoded body holds dicts: checked first, they skip Mapping's ABC __instancecheck__, which
    # was most of the modern envelope check's cost (three per request; the front door and the
    # app each resolve a workflow_invoke call's era).
    return type(value) is dict or isinstance(value, Mapping)


def _check_modern_envelope(
    message: Mapping[str, Any], headers: Mapping[str, str]
) -> Mapping[str, Any]:
    params = message.get("params")
    if not _is_object(params) or not _is_object(meta := params.get("_meta")):
        raise JsonRpcFault(
            INVALID_PARAMS,
            "params._meta must carry the protocol version and client capabilities",
        )
    if PROTOCOL_VERSION_KEY not in meta or CLIENT_CAPABILITIES_KEY not in meta:
        missing = [
            key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta
        ]
        raise JsonRpcFault(INVALID_PARAMS, f"params._meta is missing {', '.join(missing)}")
    version = meta[PROTOCOL_VERSION_KEY]
    if headers.get(VERSION_HEADER) != version:
        raise JsonRpcFault(HEADER_MISMATCH, "MCP-Protocol-Version header does not match _meta")
    method = message.get("method")
    if headers.get(METHOD_HEADER) != method:
        raise JsonRpcFault(HEADER_MISMATCH, "Mcp-Method header does not match the method")
    name_key = _NAME_BEARING.get(method) if isinstance(method, str) else None
    if name_key is not None:
        named = params.get(name_key)
        if named is not None and headers.get(NAME_HEADER) != named:
            raise JsonRpcFault(HEADER_MISMATCH, f"Mcp-Name header does not match params.{name_key}")
    if not isinstance(version, str):
        raise JsonRpcFault(INVALID_PARAMS, "the protocol version must be a string")
    if version != MODERN_VERSION:
        raise _unsupported(version)
    capabilities = meta[CLIENT_CAPABILITIES_KEY]
    if not _is_object(capabilities):
        raise JsonRpcFault(INVALID_PARAMS, "client capabilities must be an object")
    return capabilities


def _unsupported(requested: str) -> JsonRpcFault:
    return JsonRpcFault(
        UNSUPPORTED_PROTOCOL_VERSION,
        "unsupported protocol version",
        data={"requested": requested, "supported": list(SUPPORTED_VERSIONS)},
        http_status=400,
    )
