"""Every tool's error answers conform to the outputSchema it declares (issue 40, interop a).

MCP requires structuredContent to conform to a tool's declared outputSchema, and third-party
clients (the MCP Inspector, the TypeScript SDK) check it on isError results too: a declared
schema that only admits the success shape turns each of our refusals into a client-side
schema error. Each tool is driven through POST /mcp with inputs that error, and every answer,
error or not, is validated against the outputSchema tools/list declares for that tool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from generated.routes import ROUTES
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("000:Error envelopes")

REPO_ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = REPO_ROOT / "contracts" / "workflow-admin" / "examples.json"
CATALOG = REPO_ROOT / "generated" / "catalog.json"


async def _listed_tools(client: McpTestClient) -> dict[str, dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        result = (await client.request("tools/list", {"cursor": cursor} if cursor else {})).result
        tools.update({tool["name"]: tool for tool in result["tools"]})
        cursor = result.get("nextCursor")
        if cursor is None:
            return tools


def _erring_inputs(name: str) -> list[dict[str, Any]]:
    """Inputs that make the tool refuse: an unknown member, nothing, and the contract example.

    The contract example names ids this empty database does not hold (or a host the caller
    does not publish for), so most tools refuse it; a tool that accepts it is still checked.
    """
    example = json.loads(EXAMPLES.read_text(encoding="utf-8"))["examples"][name]["input"]
    return [{"notAMember": 1}, {}, example]


async def test_every_error_answer_of_every_tool_conforms_to_its_declared_output_schema(
    mcp: McpTestClient,
) -> None:
    tools = await _listed_tools(mcp)
    errors_seen: dict[str, set[str]] = {name: set() for name in tools}
    for name, tool in tools.items():
        validator = jsonschema.Draft202012Validator(tool["outputSchema"])
        for arguments in _erring_inputs(name):
            result = await mcp.call_tool(name, arguments)
            content = result.get("structuredContent")
            assert content is not None, (name, result)
            problems = [error.message for error in validator.iter_errors(content)]
            assert problems == [], (name, arguments, content, problems)
            if result.get("isError"):
                errors_seen[name].add(content["error"]["code"])
    assert [name for name, codes in errors_seen.items() if not codes] == []
    assert set().union(*errors_seen.values()) >= {
        "WORKFLOW_INPUT_INVALID",
        "WORKFLOW_POLICY_DENIED",
    }


async def test_the_declared_output_schema_admits_only_the_success_shape_or_the_envelope(
    mcp: McpTestClient,
) -> None:
    tools = await _listed_tools(mcp)
    envelope = {"status": "failed", "error": {"code": "WORKFLOW_TASK_FAILED"}}
    for name, tool in tools.items():
        schema = tool["outputSchema"]
        assert schema["type"] == "object", name
        validator = jsonschema.Draft202012Validator(schema)
        # An envelope missing the fields seed 000 requires of error is neither branch.
        assert not validator.is_valid(envelope), name
        assert not validator.is_valid({"unexpected": True}), name


def test_tools_list_declares_the_output_schema_the_generated_catalog_shows() -> None:
    catalog = json.loads(CATALOG.read_text(encoding="utf-8"))["tools"]
    for tool in catalog:
        assert ROUTES[tool["name"]].declared_output_schema == tool["outputSchema"], tool["name"]
