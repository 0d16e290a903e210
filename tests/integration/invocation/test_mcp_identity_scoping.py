"""Who may see what: lifecycle tools bind a run to host, client principal and subject."""

from __future__ import annotations

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, definition_yaml, new_id
from tests.support.invocation import CALLER, client, ok, publish_tool, refused, save_head
from tests.support.mcp import MODERN, McpTestClient
from tests.support.tokens import auth_headers

LIFECYCLE_TOOLS = ("workflow_get_status", "workflow_get_result", "workflow_cancel")


def _as(http: httpx.AsyncClient, identity: DevIdentity, **claims: object) -> McpTestClient:
    """CALLER's user id, with the given extra claims (another sub, another client)."""
    user = identity.user_token(
        host_id=HOST, user_id=CALLER, roles=("admin", "workflow-admin"), extra_claims=claims
    )
    return McpTestClient(
        http, MODERN, auth_headers(identity, user, identity.app_token(host_id=HOST))
    )


@pytest.mark.requirement("001:Asynchronous Tools")
async def test_the_same_user_through_another_client_or_as_another_subject_cannot_reach_the_run(
    owner: McpTestClient, caller: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    receipt = ok(await caller.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))
    instance = {"workflowInstanceId": receipt["workflowInstanceId"]}
    strangers = [
        _as(http, dev_identity, client_id="another-client"),
        _as(http, dev_identity, sub="someone-else-with-the-same-uid"),
    ]
    for stranger in strangers:
        for tool in LIFECYCLE_TOOLS:
            refused(await stranger.call_tool(tool, instance), "WORKFLOW_NOT_FOUND")
        refused(
            await stranger.call_tool("workflow_wait_result", {**instance, "waitMs": 0}),
            "WORKFLOW_NOT_FOUND",
        )
    assert ok(await caller.call_tool("workflow_get_status", instance))["state"] == "ACCEPTED"


@pytest.mark.requirement("000:Operator setup")
async def test_a_holder_of_a_retire_role_reads_the_head_of_a_tool_it_does_not_own_and_retires_it(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    tool = await publish_tool(owner)
    retirer = client(http, dev_identity, "genai-admin-1", roles=("genai-admin",))
    head = ok(
        await retirer.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool.tool_id})
    )
    assert head["activeBindingId"] == tool.binding_id
    retire = {
        "hostId": HOST,
        "toolId": tool.tool_id,
        "expectedAggregateVersion": head["aggregateVersion"],
        "operationId": new_id(),
    }
    assert ok(await retirer.call_tool("workflow_binding_retire", retire))["result"] == "retired"
    reviewer = client(http, dev_identity, "reviewer-1", roles=("workflow-admin",))
    refused(
        await reviewer.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool.tool_id}),
        "WORKFLOW_NOT_FOUND",
    )
