"""Revision 2025-11-25's experimental tasks through POST /mcp (issue 35 item 2).

Raw JSON-RPC; every reply is checked against the 2025-11-25 MCP schema.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import new_id
from tests.support.human_tasks import approval_yaml
from tests.support.invocation import client, ok, save_head
from tests.support.mcp import LEGACY, McpTestClient, assert_valid_mcp
from tests.support.mcp_tasks import legacy, legacy_task_reaching, modern

pytestmark = pytest.mark.requirement("issue-35:mcp-tasks")

MINE = "admin"
FAILING = (
    "document:\n"
    '  dsl: "1.0.3"\n'
    "  namespace: claims\n"
    "  name: failing-claim\n"
    '  version: "1.0.0"\n'
    "do:\n"
    "  - boom:\n"
    "      raise:\n"
    "        error:\n"
    "          type: https://errors.example.com/boom\n"
    "          status: 500\n"
    "          title: claim lookup failed\n"
)


async def _started(who: McpTestClient, owner: McpTestClient, text: str, **task: Any) -> str:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    arguments = {"wfDefId": wf_def_id, "input": {}}
    params = {"name": "workflow_start", "arguments": arguments, "task": task}
    result = (await legacy(who, "tools/call", params)).result
    assert_valid_mcp(LEGACY, "CreateTaskResult", result)
    assert result["task"]["status"] == "working"
    return str(result["task"]["taskId"])


async def _all_tools(who: McpTestClient, send: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        result = (
            await send(who, "tools/list", {} if cursor is None else {"cursor": cursor})
        ).result
        tools.extend(result["tools"])
        cursor = result.get("nextCursor")
        if cursor is None:
            return tools


async def test_initialize_declares_tasks_and_only_workflow_start_supports_them_in_this_era(
    caller: McpTestClient,
) -> None:
    init = await legacy(
        caller,
        "initialize",
        {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "1"},
        },
    )
    assert_valid_mcp(LEGACY, "InitializeResult", init.result)
    assert init.result["capabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    tools = {tool["name"]: tool for tool in await _all_tools(caller, legacy)}
    assert tools["workflow_start"]["execution"] == {"taskSupport": "optional"}
    assert [name for name, tool in tools.items() if "execution" in tool] == ["workflow_start"]
    modern_tools = await _all_tools(caller, modern)
    assert all("execution" not in tool for tool in modern_tools)


async def test_a_task_augmented_start_asks_is_answered_by_workflow_task_complete_and_has_a_result(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    task_id = await _started(caller, owner, approval_yaml(role=MINE), ttl=60_000)
    waiting = await legacy_task_reaching(caller, task_id, ("input_required",))
    assert waiting["ttl"] == 60_000 and waiting["pollInterval"] > 0
    [human] = ok(await caller.call_tool("workflow_task_list", {}))["tasks"]
    assert human["taskId"] in waiting["statusMessage"]
    answer = {"taskId": human["taskId"], "value": "APPROVED", "operationId": str(uuid.uuid4())}
    ok(await caller.call_tool("workflow_task_complete", answer))
    result = (await legacy(caller, "tasks/result", {"taskId": task_id})).result
    assert_valid_mcp(LEGACY, "CallToolResult", result)
    assert result["isError"] is False
    assert result["structuredContent"]["output"] == {"decision": "APPROVED", "by": "caller-1"}
    assert result["_meta"] == {"io.modelcontextprotocol/related-task": {"taskId": task_id}}
    done = await legacy_task_reaching(caller, task_id, ("completed",))
    assert "result" not in done


async def test_an_is_error_result_is_a_failed_task_in_this_era(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    task_id = await _started(caller, owner, FAILING)
    failed = await legacy_task_reaching(caller, task_id, ("failed", "completed"))
    assert failed["status"] == "failed"
    result = (await legacy(caller, "tasks/result", {"taskId": task_id})).result
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "WORKFLOW_TASK_FAILED"


async def test_tasks_list_pages_the_callers_own_tasks_only(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
) -> None:
    text = approval_yaml(role="approver")
    mine = [await _started(caller, owner, text) for _ in range(3)]
    stranger = client(http, dev_identity, "mallory")
    theirs = await _started(stranger, owner, text)
    listed: list[str] = []
    cursor: str | None = None
    while True:
        params = {} if cursor is None else {"cursor": cursor}
        page = (await legacy(caller, "tasks/list", params)).result
        assert_valid_mcp(LEGACY, "ListTasksResult", page)
        assert len(page["tasks"]) <= 2  # the tests' page size
        listed.extend(task["taskId"] for task in page["tasks"])
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert listed == mine
    other = (await legacy(stranger, "tasks/list", {})).result
    assert [task["taskId"] for task in other["tasks"]] == [theirs]
    bad = await legacy(caller, "tasks/list", {"cursor": "not-a-cursor"})
    assert bad.error["code"] == -32602


async def test_cancel_answers_the_cancelled_task_and_refuses_a_terminal_one(
    owner: McpTestClient, caller: McpTestClient, workers: Any
) -> None:
    task_id = await _started(caller, owner, approval_yaml(role=MINE))
    await legacy_task_reaching(caller, task_id, ("input_required",))
    cancelled = (await legacy(caller, "tasks/cancel", {"taskId": task_id})).result
    assert_valid_mcp(LEGACY, "CancelTaskResult", cancelled)
    assert cancelled["status"] == "cancelled"
    again = await legacy(caller, "tasks/cancel", {"taskId": task_id})
    assert again.error["code"] == -32602
    result = (await legacy(caller, "tasks/result", {"taskId": task_id})).result
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "WORKFLOW_CANCELLED"


async def test_another_users_task_is_unknown_in_this_era_too(
    owner: McpTestClient,
    caller: McpTestClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
) -> None:
    task_id = await _started(caller, owner, approval_yaml(role=MINE))
    stranger = client(http, dev_identity, "mallory")
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        error = (await legacy(stranger, method, {"taskId": task_id})).error
        assert error == {"code": -32602, "message": "Failed to retrieve task: Task not found"}


async def test_a_start_without_params_task_is_the_plain_receipt(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, approval_yaml(role=MINE))
    params = {"name": "workflow_start", "arguments": {"wfDefId": wf_def_id, "input": {}}}
    result = (await legacy(caller, "tools/call", params)).result
    assert "task" not in result and result["isError"] is False


async def test_a_task_augmented_call_naming_no_string_is_still_invalid_params(
    caller: McpTestClient,
) -> None:
    for name in ([], {"a": 1}, 7, None):
        params = {"name": name, "arguments": {}, "task": {}}
        assert (await legacy(caller, "tools/call", params)).error["code"] == -32602
