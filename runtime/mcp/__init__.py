"""MCP over Streamable HTTP: JSON-RPC framing, both eras, tools/list, tools/call dispatch.

The names below are what code outside runtime/ uses: handlers (ToolCall, ToolHandler,
InputFailure) and the reference Gateway, which serves its own Tools with this protocol code.
"""

from __future__ import annotations

from runtime.mcp.bearer_gate import BearerGate, unauthenticated
from runtime.mcp.call import InputFailure, ToolCall, ToolHandler
from runtime.mcp.dispatch import ToolOutcome, error_outcome, repeated_members_refusal
from runtime.mcp.http_checks import (
    duplicate_credential_fault,
    is_json_content_type,
    unsupported_media_fault,
)
from runtime.mcp.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    JsonRpcFault,
    RepeatedMembers,
)
from runtime.mcp.origins import origin_allowed
from runtime.mcp.paging import Pages
from runtime.mcp.protected_resource import (
    METADATA_PATH,
    bearer_challenge,
    resource_metadata,
    with_resource_metadata,
)
from runtime.mcp.protocol import LEGACY_VERSION
from runtime.mcp.server import HttpReply, McpServer
from runtime.mcp.tasks import EXTENSION as TASKS_EXTENSION
from runtime.mcp.tasks import InputRequired, InputRound, form_request
from runtime.mcp.tools import declared_output_schema, describe_tool

__all__ = [
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LEGACY_VERSION",
    "METADATA_PATH",
    "METHOD_NOT_FOUND",
    "TASKS_EXTENSION",
    "BearerGate",
    "HttpReply",
    "InputFailure",
    "InputRequired",
    "InputRound",
    "JsonRpcFault",
    "McpServer",
    "Pages",
    "RepeatedMembers",
    "ToolCall",
    "ToolHandler",
    "ToolOutcome",
    "bearer_challenge",
    "declared_output_schema",
    "describe_tool",
    "duplicate_credential_fault",
    "error_outcome",
    "form_request",
    "is_json_content_type",
    "origin_allowed",
    "repeated_members_refusal",
    "resource_metadata",
    "unauthenticated",
    "unsupported_media_fault",
    "with_resource_metadata",
]
