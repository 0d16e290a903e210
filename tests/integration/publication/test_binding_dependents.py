"""The reverse dependency gate: a Tool other active bindings pin is not moved under them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, binding, definition_yaml, new_id, publish_args
from tests.support.invocation import Tool, client, ok, publish_tool, publish_version, refused
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("001:Publication, Versioning, And Rollback")

CONTRACT = "sha256:" + "c" * 64


def pin(inner: Tool, version: str) -> dict[str, Any]:
    """A dependency of an outer Tool on the inner workflow-backed Tool at version."""
    return {
        "nestedToolId": inner.tool_id,
        "nestedToolVersion": version,
        "contractDigest": CONTRACT,
        "authorizationToolName": "claims.inner",
        "dispatchTarget": "claims.inner",
        "toolAnnotations": {"readOnly": True, "destructive": False},
    }


async def _outer(
    owner: McpTestClient, inner: Tool, version: str, name: str, outer: Tool | None = None
) -> dict[str, Any]:
    """Publish (or repin) an outer Tool pinning the inner one at version; its receipt."""
    base = outer or await publish_tool(owner, toolName=name)
    value = binding(base.wf_def_id, base.tool_id, base.text, toolName=name, syncWaitMs=19000)
    head = await _head(owner, base.tool_id)
    args = publish_args(value, head["aggregateVersion"], dependencies=[pin(inner, version)])
    receipt = ok(await owner.call_tool("workflow_binding_publish", args))
    assert receipt["status"] == "active", receipt
    return receipt


async def _head(owner: McpTestClient, tool_id: str) -> dict[str, Any]:
    return ok(await owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool_id}))


async def _promote(owner: McpTestClient, inner: Tool, version: str) -> dict[str, Any]:
    """Publish the inner Tool's next version and a binding pinning it (self-approved)."""
    text = definition_yaml(marker=2).replace('"1.2.0"', f'"{version}"')
    await publish_version(owner, inner.wf_def_id, text, version)
    value = binding(inner.wf_def_id, inner.tool_id, text, version=version)
    head = await _head(owner, inner.tool_id)
    return await owner.call_tool(
        "workflow_binding_publish", publish_args(value, head["aggregateVersion"])
    )


def _affected(error: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t["toolName"], t["pinnedVersion"]) for t in error["error"]["details"]["affectedTools"]]


async def test_promoting_an_inner_tool_that_outer_bindings_pin_is_refused_listing_them(
    owner: McpTestClient,
) -> None:
    inner = await publish_tool(owner, toolName="claims.inner")
    first = await _outer(owner, inner, "1.2.0", "claims.outer-a")
    await _outer(owner, inner, "1.2.0", "claims.outer-b")
    before = await _head(owner, inner.tool_id)
    error = refused(await _promote(owner, inner, "1.3.0"), "WORKFLOW_STATE_CONFLICT")
    assert _affected(error) == [("claims.outer-a", "1.2.0"), ("claims.outer-b", "1.2.0")]
    assert error["error"]["details"]["affectedTools"][0]["bindingId"] == first["bindingId"]
    assert "claims.outer-a, claims.outer-b" in error["error"]["message"]
    assert await _head(owner, inner.tool_id) == before


async def test_retiring_an_inner_tool_that_an_outer_binding_pins_is_refused(
    owner: McpTestClient,
) -> None:
    inner = await publish_tool(owner, toolName="claims.inner")
    await _outer(owner, inner, "1.2.0", "claims.outer")
    head = await _head(owner, inner.tool_id)
    retire = {
        "hostId": HOST,
        "toolId": inner.tool_id,
        "expectedAggregateVersion": head["aggregateVersion"],
        "operationId": new_id(),
    }
    error = refused(
        await owner.call_tool("workflow_binding_retire", retire), "WORKFLOW_STATE_CONFLICT"
    )
    assert _affected(error) == [("claims.outer", "1.2.0")]
    assert (await _head(owner, inner.tool_id))["activeBindingId"] == inner.binding_id


async def test_a_change_that_keeps_the_pinned_version_serving_is_allowed(
    owner: McpTestClient,
) -> None:
    inner = await publish_tool(owner, toolName="claims.inner")
    await _outer(owner, inner, "1.2.0", "claims.outer")
    value = binding(inner.wf_def_id, inner.tool_id, inner.text, toolName="claims.inner")
    value["syncWaitMs"] = 15000
    head = await _head(owner, inner.tool_id)
    receipt = ok(
        await owner.call_tool(
            "workflow_binding_publish", publish_args(value, head["aggregateVersion"])
        )
    )
    assert receipt["status"] == "active"


async def test_after_the_outer_tools_are_repinned_the_promotion_and_no_rollback_passes(
    owner: McpTestClient,
) -> None:
    inner = await publish_tool(owner, toolName="claims.inner")
    outer = await publish_tool(owner, toolName="claims.outer")
    await _outer(owner, inner, "1.2.0", "claims.outer", outer)
    refused(await _promote(owner, inner, "1.3.0"), "WORKFLOW_STATE_CONFLICT")
    await _outer(owner, inner, "1.3.0", "claims.outer", outer)
    promoted = ok(await _promote(owner, inner, "1.3.0"))
    rollback = {
        "hostId": HOST,
        "toolId": inner.tool_id,
        "expectedBindingDigest": promoted["bindingDigest"],
        "comment": "back to 1.2.0",
        "operationId": new_id(),
    }
    error = refused(
        await owner.call_tool("workflow_binding_rollback", rollback), "WORKFLOW_STATE_CONFLICT"
    )
    assert _affected(error) == [("claims.outer", "1.3.0")]


async def test_a_rollback_plan_repins_the_outer_tools_atomically(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    inner = await publish_tool(owner, toolName="claims.inner")
    promoted = ok(await _promote(owner, inner, "1.3.0"))
    outer = await publish_tool(owner, toolName="claims.outer")
    await _outer(owner, inner, "1.3.0", "claims.outer", outer)
    # Another author proposes the outer Tool pinned back at 1.2.0: pending the owner's approval.
    author = client(http, dev_identity, "an-author", roles=("admin",))
    value = binding(outer.wf_def_id, outer.tool_id, outer.text, toolName="claims.outer")
    head = await _head(owner, outer.tool_id)
    args = publish_args(value, head["aggregateVersion"], dependencies=[pin(inner, "1.2.0")])
    proposed = ok(await author.call_tool("workflow_binding_publish", args))
    assert proposed["status"] == "pendingApproval"
    rollback = {
        "hostId": HOST,
        "toolId": inner.tool_id,
        "expectedBindingDigest": promoted["bindingDigest"],
        "comment": "back to 1.2.0 with the outer Tool",
        "operationId": new_id(),
    }
    refused(await owner.call_tool("workflow_binding_rollback", rollback), "WORKFLOW_STATE_CONFLICT")
    stray = dict(rollback, operationId=new_id(), repinBindingIds=[inner.binding_id])
    refused(await owner.call_tool("workflow_binding_rollback", stray), "WORKFLOW_STATE_CONFLICT")
    planned = dict(rollback, operationId=new_id(), repinBindingIds=[proposed["bindingId"]])
    receipt = ok(await owner.call_tool("workflow_binding_rollback", planned))
    assert receipt["workflowVersion"] == "1.2.0"
    assert receipt["repinnedBindingIds"] == [proposed["bindingId"]]
    outer_head = await _head(owner, outer.tool_id)
    assert outer_head["activeBindingId"] == proposed["bindingId"]
    assert outer_head["decisions"][0]["action"] == "approve"


async def test_a_plan_is_refused_whole_when_the_caller_does_not_own_a_repinned_tool(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    inner = await publish_tool(owner, toolName="claims.inner")
    promoted = ok(await _promote(owner, inner, "1.3.0"))
    outer = await publish_tool(owner, toolName="claims.outer")
    await _outer(owner, inner, "1.3.0", "claims.outer", outer)
    author = client(http, dev_identity, "an-author", roles=("admin",))
    value = binding(outer.wf_def_id, outer.tool_id, outer.text, toolName="claims.outer")
    head = await _head(owner, outer.tool_id)
    args = publish_args(value, head["aggregateVersion"], dependencies=[pin(inner, "1.2.0")])
    proposed = ok(await author.call_tool("workflow_binding_publish", args))
    # The outer definition changes hands: its pending revision now waits for another owner.
    transfer = {
        "hostId": HOST,
        "wfDefId": outer.wf_def_id,
        "sourceRevision": 2,
        "actor": "steve",
        "namespace": "claims",
        "name": "summarize-claim",
        "version": "1.2.0",
        "definition": definition_yaml(),
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": False,
        "owner": {"userId": "another-owner"},
        "active": True,
    }
    ok(await owner.call_tool("workflow_definition_save", transfer))
    planned = {
        "hostId": HOST,
        "toolId": inner.tool_id,
        "expectedBindingDigest": promoted["bindingDigest"],
        "comment": "the outer Tool is not mine to approve",
        "operationId": new_id(),
        "repinBindingIds": [proposed["bindingId"]],
    }
    refused(await owner.call_tool("workflow_binding_rollback", planned), "WORKFLOW_POLICY_DENIED")
    assert (await _head(owner, inner.tool_id))["activeBindingId"] == promoted["bindingId"]
    outer_head = await _head(author, outer.tool_id)
    assert outer_head["pendingBindingId"] == proposed["bindingId"]
