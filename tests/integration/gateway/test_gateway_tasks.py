"""MCP tasks through the reference Gateway (issue 35 item 3): workflow_start relayed with the
client's task capability, tasks/* relayed to Workflow with the user's and the Gateway's bearers.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import new_id
from tests.support.gateway import RecordingTransport, gateway_client
from tests.support.human_tasks import approval_yaml
from tests.support.invocation import save_head
from tests.support.mcp import LEGACY, McpTestClient, assert_valid_mcp
from tests.support.mcp_tasks import (
    EXTENSION,
    get_task,
    legacy,
    legacy_task_reaching,
    modern,
    start_task,
    task_reaching,
)

pytestmark = pytest.mark.requirement("issue-35:mcp-tasks")

ROLE = "workflow-admin"


def _user(http: httpx.AsyncClient, identity: DevIdentity, era: str, **kw: Any) -> McpTestClient:
    return gateway_client(http, identity, roles=kw.pop("roles", (ROLE,)), era=era, **kw)


async def _definition(owner: McpTestClient) -> str:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, approval_yaml(role=ROLE))
    return wf_def_id


async def test_a_start_through_the_gateway_is_a_task_asked_answered_and_completed(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    workflow_seen: RecordingTransport,
    workers: Any,
) -> None:
    user = _user(gateway_http, dev_identity, "2026-07-28")
    discovered = (await modern(user, "server/discover", {})).result
    assert discovered["capabilities"]["extensions"] == {EXTENSION: {}}
    created = await start_task(user, await _definition(owner))
    asked = await task_reaching(user, created["taskId"], ("input_required",))
    [key] = asked["inputRequests"]
    responses = {key: {"action": "accept", "content": {"value": "APPROVED"}}}
    update = {"taskId": created["taskId"], "inputResponses": responses}
    assert (await modern(user, "tasks/update", update)).result["resultType"] == "complete"
    done = await task_reaching(user, created["taskId"], ("completed",))
    assert done["result"]["structuredContent"]["output"]["decision"] == "APPROVED"
    # Every relay carried both bearers, and the task methods went to Workflow as they came.
    relayed = [
        r for r in workflow_seen.requests if r.headers.get("mcp-method", "").startswith("tasks/")
    ]
    assert relayed and all(
        r.headers["authorization"].startswith("Bearer ")
        and r.headers["x-scope-token"].startswith("Bearer ")
        and r.headers["mcp-name"] == created["taskId"]
        for r in relayed
    )
    start = next(
        msgspec.json.decode(r.content)
        for r in workflow_seen.requests
        if r.headers.get("mcp-method") == "tools/call"
    )
    capabilities = start["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert capabilities == {"extensions": {EXTENSION: {}}}


async def test_through_the_gateway_another_users_task_is_unknown_and_a_role_is_still_needed(
    gateway_http: httpx.AsyncClient, dev_identity: DevIdentity, owner: McpTestClient
) -> None:
    user = _user(gateway_http, dev_identity, "2026-07-28")
    created = await start_task(user, await _definition(owner))
    stranger = _user(gateway_http, dev_identity, "2026-07-28", user_id="mallory")
    error = (await modern(stranger, "tasks/get", {"taskId": created["taskId"]})).error
    assert error == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    refused = await modern(stranger, "tasks/get", {"taskId": created["taskId"]}, capabilities={})
    assert refused.error["code"] == -32021
    no_role = _user(gateway_http, dev_identity, "2026-07-28", roles=("genai-admin",))
    arguments = {"wfDefId": await _definition(owner), "input": {}}
    reply = await modern(no_role, "tools/call", {"name": "workflow_start", "arguments": arguments})
    assert reply.result["resultType"] == "complete" and reply.result["isError"] is True
    assert reply.result["structuredContent"]["error"]["code"] == "WORKFLOW_POLICY_DENIED"
    assert (await get_task(user, created["taskId"]))["taskId"] == created["taskId"]


async def test_the_gateway_relays_2025_11_25_tasks(
    gateway_http: httpx.AsyncClient, dev_identity: DevIdentity, owner: McpTestClient, workers: Any
) -> None:
    user = _user(gateway_http, dev_identity, LEGACY)
    init = await legacy(
        user,
        "initialize",
        {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )
    assert "tasks" in init.result["capabilities"]
    arguments = {"wfDefId": await _definition(owner), "input": {}}
    params = {"name": "workflow_start", "arguments": arguments, "task": {"ttl": 120_000}}
    created = (await legacy(user, "tools/call", params)).result
    assert_valid_mcp(LEGACY, "CreateTaskResult", created)
    task_id = created["task"]["taskId"]
    assert created["task"]["ttl"] == 120_000
    await legacy_task_reaching(user, task_id, ("input_required",))
    listed = (await legacy(user, "tasks/list", {})).result
    assert [task["taskId"] for task in listed["tasks"]] == [task_id]
    cancelled = (await legacy(user, "tasks/cancel", {"taskId": task_id})).result
    assert cancelled["status"] == "cancelled"
    result = (await legacy(user, "tasks/result", {"taskId": task_id})).result
    assert result["isError"] is True
