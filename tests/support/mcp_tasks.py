"""Raw JSON-RPC task calls for the MCP tasks tests (issue 35), in both protocol revisions.

Every reply of the extension (2026-07-28) is checked against the extension's own JSON schema,
tests/support/ext_tasks/schema.json: schema/draft/schema.json of the public repository
modelcontextprotocol/ext-tasks at e4345978be1f602f1fc48d89051e8559dd5302a6 (Apache-2.0),
copied unchanged. 2025-11-25 replies are checked against that revision's MCP schema.
"""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path
from typing import Any

import jsonschema

from tests.support.mcp import LEGACY, MODERN, McpReply, McpTestClient, assert_valid_mcp
from tests.support.waiting import wait_until

EXTENSION = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"extensions": {EXTENSION: {}}}
_IDS = itertools.count(1_000)


@functools.cache
def _ext_schema() -> dict[str, Any]:
    path = Path(__file__).with_name("ext_tasks") / "schema.json"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def assert_valid_ext(definition: str, instance: Any) -> None:
    """Validate instance against a $defs entry of the tasks extension's schema."""
    root = dict(_ext_schema())
    root["$ref"] = f"#/$defs/{definition}"
    jsonschema.Draft202012Validator(root).validate(instance)


async def modern(
    who: McpTestClient,
    method: str,
    params: dict[str, Any],
    *,
    capabilities: dict[str, Any] | None = None,
    name: str | None = None,
) -> McpReply:
    """One 2026-07-28 request declaring capabilities (the extension by default)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": WITH_TASKS
        if capabilities is None
        else capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"},
    }
    message = {
        "jsonrpc": "2.0",
        "id": next(_IDS),
        "method": method,
        "params": {**params, "_meta": meta},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        **who.auth,
    }
    named = name if name is not None else params.get("taskId", params.get("name"))
    if isinstance(named, str):
        headers["Mcp-Name"] = named
    reply = await who.post_raw(json.dumps(message), headers)
    assert_valid_mcp(
        MODERN,
        "JSONRPCErrorResponse" if "error" in reply.body else "JSONRPCResultResponse",
        reply.body,
    )
    return reply


async def legacy(who: McpTestClient, method: str, params: dict[str, Any]) -> McpReply:
    """One 2025-11-25 request (after initialize, which is stateless here)."""
    message = {"jsonrpc": "2.0", "id": next(_IDS), "method": method, "params": params}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "MCP-Protocol-Version": LEGACY,
        **who.auth,
    }
    reply = await who.post_raw(json.dumps(message), headers)
    assert_valid_mcp(
        LEGACY,
        "JSONRPCErrorResponse" if "error" in reply.body else "JSONRPCResultResponse",
        reply.body,
    )
    return reply


async def start_task(who: McpTestClient, wf_def_id: str, data: Any = None) -> dict[str, Any]:
    """tools/call workflow_start declaring the extension: the CreateTaskResult."""
    arguments = {"wfDefId": wf_def_id, "input": {} if data is None else data}
    reply = await modern(who, "tools/call", {"name": "workflow_start", "arguments": arguments})
    result = reply.result
    assert result["resultType"] == "task", result
    assert_valid_ext("CreateTaskResult", result)
    return result


async def get_task(who: McpTestClient, task_id: str) -> dict[str, Any]:
    """tasks/get: the GetTaskResult, schema-checked."""
    result = (await modern(who, "tasks/get", {"taskId": task_id})).result
    assert_valid_ext("GetTaskResult", result)
    return result


async def task_reaching(
    who: McpTestClient, task_id: str, statuses: tuple[str, ...], within_s: float = 15.0
) -> dict[str, Any]:
    """Poll tasks/get until the task's status is one of statuses; that GetTaskResult."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        seen.update(await get_task(who, task_id))
        return seen["status"] in statuses

    await wait_until(reached, what=f"the task {statuses}", within_s=within_s)
    return seen


async def legacy_task_reaching(
    who: McpTestClient, task_id: str, statuses: tuple[str, ...], within_s: float = 15.0
) -> dict[str, Any]:
    """Poll 2025-11-25 tasks/get until the task's status is one of statuses."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        result = (await legacy(who, "tasks/get", {"taskId": task_id})).result
        assert_valid_mcp(LEGACY, "GetTaskResult", result)
        seen.update(result)
        return seen["status"] in statuses

    await wait_until(reached, what=f"the task {statuses}", within_s=within_s)
    return seen
