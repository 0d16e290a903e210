"""A workflow_start run's `call: mcp` under grants synced through the contract, by Tool UUID.

A grant names a Tool by its stable toolId; a run started without a binding calls the tool by
the name the Gateway lists. The call is covered by a grant whose Tool is published under that
name on the run's own host now, read live at every dispatch. Everything goes through POST /mcp.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from runtime.addresses import LOOPBACK_NETWORKS
from runtime.collaborators import Services
from runtime.execution.settings import ExecutionSettings
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, OWNER, OWNER_POSITION, definition_yaml, new_id
from tests.support.execution import LocalServer, serving
from tests.support.invocation import Tool, client, ok, publish_tool, running_executor
from tests.support.mcp import McpTestClient
from tests.support.outbound import allow_http

TOOL = "accounts.lookup"
OTHER_HOST = "3f0c9a52-7b1e-4d2a-8e6f-1a2b3c4d5e6f"


@pytest.fixture
async def gateway() -> AsyncIterator[LocalServer]:
    """A stub MCP endpoint standing for the Gateway; it records each tools/call."""
    async with serving(LocalServer()) as running:  # type: ignore[arg-type]
        yield running  # type: ignore[misc]


@pytest.fixture
async def published_tool(owner: McpTestClient) -> Tool:
    """A workflow-backed Tool published on HOST under the MCP name TOOL."""
    return await publish_tool(owner, toolName=TOOL)


def admin(http: httpx.AsyncClient, identity: DevIdentity, host_id: str = HOST) -> McpTestClient:
    """A workflow-admin of host_id who saves, grants and starts (a token outliving the run's
    deadline of 30 days, since without token exchange a start run must be covered by its user
    token)."""
    return client(http, identity, OWNER, host_id=host_id, ttl=31 * 86_400)


async def save_caller(admin: McpTestClient, host_id: str = HOST, *, calls: int = 1) -> str:
    """Save a definition that calls TOOL over MCP `calls` times (1 or 2); its wfDefId."""
    wf_def_id = new_id()
    again = (
        f"  - again:\n      call: mcp\n      with:\n        tool: {TOOL}\n        arguments: {{}}\n"
    )
    args = {
        "hostId": host_id, "wfDefId": wf_def_id, "sourceRevision": 1, "actor": "steve",
        "namespace": "claims", "name": "summarize-claim", "version": "1.2.0",
        "definition": definition_yaml(mcp_tool=TOOL, extra_task=again if calls > 1 else ""),
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": False, "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
        "active": True,
    }  # fmt: skip
    ok(await admin.call_tool("workflow_definition_save", args))
    return wf_def_id


async def sync_grants(
    admin: McpTestClient, wf_def_id: str, revision: int, tool_ids: list[str], host_id: str = HOST
) -> None:
    """workflow_definition_grants_sync: one grant per Tool UUID, for every test environment."""
    grants = [
        {"grantId": new_id(), "toolId": tool_id, "toolVersion": "1.0.0",
         "lightapiDigest": "sha256:" + "a" * 64, "allowedEnvironments": ["dev", "prod"]}
        for tool_id in tool_ids
    ]  # fmt: skip
    args = {"hostId": host_id, "wfDefId": wf_def_id, "sourceRevision": revision,
            "actor": "steve", "grants": grants}  # fmt: skip
    assert ok(await admin.call_tool("workflow_definition_grants_sync", args))["result"] == "saved"


async def start_and_wait(
    services: Services, gateway: LocalServer, admin: McpTestClient, wf_def_id: str
) -> dict[str, Any]:
    """Start the saved head with workflow_start; the structured result of waiting for its end."""
    allow_http(services, *LOOPBACK_NETWORKS)
    settings = ExecutionSettings(gateway_mcp_url=f"{gateway.base}/mcp", environment="dev")
    async with running_executor(services, settings):
        started = ok(await admin.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))
        waited = {"workflowInstanceId": started["workflowInstanceId"], "waitMs": 20000}
        result = await admin.call_tool("workflow_wait_result", waited)
    return dict(result["structuredContent"])


@pytest.mark.requirement("000:Grants")
async def test_a_start_run_calls_a_published_tool_its_definition_holds_a_grant_for_by_tool_id(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    gateway: LocalServer,
    published_tool: Tool,
) -> None:
    starter = admin(http, dev_identity)
    wf_def_id = await save_caller(starter)
    await sync_grants(starter, wf_def_id, 1, [published_tool.tool_id])
    result = await start_and_wait(services, gateway, starter, wf_def_id)
    assert result["state"] == "COMPLETED", result
    assert [call["params"]["name"] for call in gateway.tool_calls] == [TOOL]


@pytest.mark.requirement("000:Grants")
async def test_a_start_run_without_a_grant_for_the_published_tool_is_denied_before_sending(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    gateway: LocalServer,
    published_tool: Tool,
) -> None:
    starter = admin(http, dev_identity)
    wf_def_id = await save_caller(starter)
    # A grant of another Tool (not published under TOOL's name) covers nothing here.
    await sync_grants(starter, wf_def_id, 1, [new_id()])
    result = await start_and_wait(services, gateway, starter, wf_def_id)
    assert result["status"] == "failed", result
    assert result["error"]["code"] == "WORKFLOW_POLICY_DENIED"
    assert gateway.tool_calls == []
    # Once the set grants the published Tool itself, the next start reaches it.
    await sync_grants(starter, wf_def_id, 2, [published_tool.tool_id])
    assert (await start_and_wait(services, gateway, starter, wf_def_id))["state"] == "COMPLETED"
    assert len(gateway.tool_calls) == 1


@pytest.mark.requirement("000:Grants")
async def test_a_revoked_grant_of_the_published_tool_denies_a_start_run_its_call(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    gateway: LocalServer,
    published_tool: Tool,
) -> None:
    starter = admin(http, dev_identity)
    wf_def_id = await save_caller(starter, calls=2)
    await sync_grants(starter, wf_def_id, 1, [published_tool.tool_id])

    async def revoke() -> None:
        if len(gateway.tool_calls) == 1:
            await sync_grants(starter, wf_def_id, 2, [])

    gateway.on_tool_call = revoke
    result = await start_and_wait(services, gateway, starter, wf_def_id)
    # Read live at every dispatch: the first call went out, the second is refused unsent.
    assert result["status"] == "failed", result
    assert result["error"]["code"] == "WORKFLOW_POLICY_DENIED"
    assert len(gateway.tool_calls) == 1


@pytest.mark.requirement("000:Grants")
async def test_a_grant_never_resolves_to_a_tool_published_on_another_host(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    gateway: LocalServer,
    published_tool: Tool,
) -> None:
    # The same grant on the Tool's own host covers the call.
    mine = admin(http, dev_identity)
    own_def = await save_caller(mine)
    await sync_grants(mine, own_def, 1, [published_tool.tool_id])
    assert (await start_and_wait(services, gateway, mine, own_def))["state"] == "COMPLETED"
    assert len(gateway.tool_calls) == 1
    # TOOL is published on HOST; a definition of OTHER_HOST holds a grant naming that Tool's
    # UUID and calls TOOL by name: the grant must not reach across hosts.
    other = admin(http, dev_identity, OTHER_HOST)
    wf_def_id = await save_caller(other, OTHER_HOST)
    await sync_grants(other, wf_def_id, 1, [published_tool.tool_id], OTHER_HOST)
    result = await start_and_wait(services, gateway, other, wf_def_id)
    assert result["status"] == "failed", result
    assert result["error"]["code"] == "WORKFLOW_POLICY_DENIED"
    assert len(gateway.tool_calls) == 1
