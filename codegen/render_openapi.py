"""generated/openapi.json: one POST /tools/{name} operation per tool, for schema fuzzing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codegen.catalog import ERROR_RESULT_DEF, BundledCatalog
from codegen.render_models import input_model_name, output_model_name

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
JSON = "application/json"

TEXT_CONTENT = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
    },
}

JSON_RPC_ERROR = {
    "type": "object",
    "required": ["jsonrpc", "error"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["string", "integer", "null"]},
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "integer"},
                "message": {"type": "string"},
                "data": {},
            },
        },
    },
}

FAULT_STATUSES = {
    "400": "Malformed JSON or a protocol fault (JSON-RPC error).",
    "401": "Authentication failure: a bearer is missing or does not verify (JSON-RPC error).",
    "404": "The tool is not served by this process (JSON-RPC error).",
    "500": "Internal error (JSON-RPC error, no detail).",
}


def call_result_schema(structured_ref: str, is_error: bool) -> dict[str, Any]:
    """The MCP CallToolResult body the HTTP route returns, for success or for an isError result."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["isError", "structuredContent"],
        "properties": {
            "isError": {"const": is_error},
            "structuredContent": {"$ref": structured_ref},
            "content": TEXT_CONTENT,
        },
    }


def _schema_ref(name: str) -> str:
    return f"#/components/schemas/{name}"


def _operation(tool_name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    success = f"{output_model_name(tool_name)}Result"
    responses: dict[str, Any] = {
        "200": {
            "description": "The tool's CallToolResult: its output, or an isError workflow error.",
            "content": {
                JSON: {
                    "schema": {
                        "oneOf": [
                            {"$ref": _schema_ref(success)},
                            {"$ref": _schema_ref("ToolErrorResult")},
                        ]
                    }
                }
            },
        }
    }
    for status, description in FAULT_STATUSES.items():
        responses[status] = {
            "description": description,
            "content": {JSON: {"schema": {"$ref": _schema_ref("JsonRpcError")}}},
        }
    return {
        "operationId": tool_name,
        "summary": str(entry.get("title", tool_name)),
        "description": str(entry.get("description", "")),
        "requestBody": {
            "required": True,
            "content": {JSON: {"schema": {"$ref": _schema_ref(input_model_name(tool_name))}}},
        },
        "responses": responses,
    }


def render_openapi(catalog: BundledCatalog, stamp: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAPI 3.1 document."""
    schemas: dict[str, Any] = {
        ERROR_RESULT_DEF: catalog.error_result_schema,
        "ToolErrorResult": call_result_schema(_schema_ref(ERROR_RESULT_DEF), True),
        "JsonRpcError": JSON_RPC_ERROR,
    }
    paths: dict[str, Any] = {}
    for tool in catalog.tools:
        output = output_model_name(tool.name)
        schemas[input_model_name(tool.name)] = tool.input_schema
        schemas[output] = tool.output_schema
        schemas[f"{output}Result"] = call_result_schema(_schema_ref(output), False)
        paths[f"/tools/{tool.name}"] = {"post": _operation(tool.name, tool.entry)}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Workflow MCP tools over HTTP", "version": "1.0.0"},
        "jsonSchemaDialect": DRAFT_2020_12,
        "x-generated": dict(stamp),
        "security": [{"bearerAuth": [], "scopeToken": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "scopeToken": {"type": "apiKey", "in": "header", "name": "X-Scope-Token"},
            },
        },
    }
