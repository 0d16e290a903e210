"""The reverse dependency gate: a Tool other active bindings pin is not moved under them."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.binding_builders import (
    HOST,
    OWNER,
    binding,
    definition_yaml,
    new_id,
    publish_args,
)
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


async def _propose(
    author: McpTestClient, owner: McpTestClient, outer: Tool, inner: Tool, version: str, name: str
) -> str:
    """Another author repins the outer Tool at the inner version: pending the owner's approval."""
    value = binding(outer.wf_def_id, outer.tool_id, outer.text, toolName=name)
    head = await _head(owner, outer.tool_id)
    args = publish_args(value, head["aggregateVersion"], dependencies=[pin(inner, version)])
    proposed = ok(await author.call_tool("workflow_binding_publish", args))
    assert proposed["status"] == "pendingApproval", proposed
    return str(proposed["bindingId"])


async def _pinned_pair(
    owner: McpTestClient, author: McpTestClient
) -> tuple[Tool, list[Tool], list[str]]:
    """An inner Tool at 1.2.0, two outer Tools pinning it, their pending repins at 1.3.0."""
    inner = await publish_tool(owner, toolName="claims.inner")
    outers, proposed = [], []
    for name in ("claims.outer-a", "claims.outer-b"):
        outer = await publish_tool(owner, toolName=name)
        await _outer(owner, inner, "1.2.0", name, outer)
        outers.append(outer)
    text = definition_yaml(marker=2).replace('"1.2.0"', '"1.3.0"')
    await publish_version(owner, inner.wf_def_id, text, "1.3.0")
    for outer, name in zip(outers, ("claims.outer-a", "claims.outer-b"), strict=True):
        proposed.append(await _propose(author, owner, outer, inner, "1.3.0", name))
    return inner, outers, proposed


def _inner_publish(
    head: dict[str, Any], inner: Tool, plan: list[str] | None = None, **changes: Any
) -> dict[str, Any]:
    """Publish arguments of the inner Tool's binding pinning version 1.3.0 (with a plan)."""
    text = definition_yaml(marker=2).replace('"1.2.0"', '"1.3.0"')
    value = binding(
        inner.wf_def_id, inner.tool_id, text, version="1.3.0", toolName="claims.inner", **changes
    )
    args = publish_args(value, head["aggregateVersion"])
    return args if plan is None else dict(args, repinBindingIds=plan)


async def _assert_unmoved(
    owner: McpTestClient, inner: Tool, outers: list[Tool], proposed: list[str]
) -> None:
    """The inner Tool still serves 1.2.0 and every repin still waits for approval."""
    assert (await _head(owner, inner.tool_id))["activeBindingId"] == inner.binding_id
    for outer, binding_id in zip(outers, proposed, strict=True):
        head = await _head(owner, outer.tool_id)
        assert head["pendingBindingId"] == binding_id
        assert head["activeBindingId"] != binding_id


async def _serves_the_new_version(owner: McpTestClient, outers: list[Tool], ids: list[str]) -> None:
    for outer, binding_id in zip(outers, ids, strict=True):
        head = await _head(owner, outer.tool_id)
        assert head["activeBindingId"] == binding_id
        assert head.get("pendingBindingId") is None
        assert head["drift"]["drifted"] is False, head["drift"]


async def test_a_publish_plan_repins_the_outer_tools_and_they_serve_the_new_version_at_once(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    author = client(http, dev_identity, "an-author", roles=("admin",))
    inner, outers, proposed = await _pinned_pair(owner, author)
    args = _inner_publish(await _head(owner, inner.tool_id), inner)
    refused(await owner.call_tool("workflow_binding_publish", args), "WORKFLOW_STATE_CONFLICT")
    planned = dict(args, operationId=new_id(), repinBindingIds=proposed)
    receipt = ok(await owner.call_tool("workflow_binding_publish", planned))
    assert receipt["status"] == "active" and receipt["workflowVersion"] == "1.3.0"
    assert receipt["repinnedBindingIds"] == proposed
    assert (await _head(owner, inner.tool_id))["activeBindingId"] == receipt["bindingId"]
    await _serves_the_new_version(owner, outers, proposed)


async def test_an_approval_plan_repins_the_outer_tools_in_the_same_transaction(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    author = client(http, dev_identity, "an-author", roles=("admin",))
    inner, outers, proposed = await _pinned_pair(owner, author)
    # The author's inner revision changes what the owner approves: it waits for approval.
    args = _inner_publish(await _head(owner, inner.tool_id), inner, syncWaitMs=18000)
    pending = ok(await author.call_tool("workflow_binding_publish", args))
    assert pending["status"] == "pendingApproval"
    decide = {
        "hostId": HOST,
        "bindingId": pending["bindingId"],
        "expectedBindingDigest": pending["bindingDigest"],
        "decision": "approve",
        "operationId": new_id(),
    }
    error = refused(
        await owner.call_tool("workflow_binding_decide", decide), "WORKFLOW_STATE_CONFLICT"
    )
    assert _affected(error) == [("claims.outer-a", "1.2.0"), ("claims.outer-b", "1.2.0")]
    planned = dict(decide, operationId=new_id(), repinBindingIds=proposed)
    receipt = ok(await owner.call_tool("workflow_binding_decide", planned))
    assert receipt["result"] == "approved" and receipt["repinnedBindingIds"] == proposed
    assert (await _head(owner, inner.tool_id))["activeBindingId"] == pending["bindingId"]
    await _serves_the_new_version(owner, outers, proposed)
    decisions = (await _head(owner, outers[0].tool_id))["decisions"]
    assert decisions[0]["action"] == "approve" and decisions[0]["actor"] == OWNER


async def test_a_promotion_plan_missing_an_affected_tool_is_refused_listing_it(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    author = client(http, dev_identity, "an-author", roles=("admin",))
    inner, outers, proposed = await _pinned_pair(owner, author)
    args = _inner_publish(await _head(owner, inner.tool_id), inner, proposed[:1])
    error = refused(
        await owner.call_tool("workflow_binding_publish", args), "WORKFLOW_STATE_CONFLICT"
    )
    # The named repin was approved inside the refused transaction: nothing of it remains.
    assert _affected(error) == [("claims.outer-b", "1.2.0")]
    await _assert_unmoved(owner, inner, outers, proposed)


async def test_a_promotion_plan_naming_a_revision_the_caller_may_not_approve_is_refused(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    author = client(http, dev_identity, "an-author", roles=("admin",))
    inner, outers, proposed = await _pinned_pair(owner, author)
    # The second outer definition changes hands: its repin now waits for another owner.
    transfer = {
        "hostId": HOST,
        "wfDefId": outers[1].wf_def_id,
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
    args = _inner_publish(await _head(owner, inner.tool_id), inner, proposed)
    refused(await owner.call_tool("workflow_binding_publish", args), "WORKFLOW_POLICY_DENIED")
    await _assert_unmoved(owner, inner, outers, proposed)


async def test_a_plan_the_call_cannot_carry_out_is_refused_and_changes_nothing(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    author = client(http, dev_identity, "an-author", roles=("admin",))
    inner, outers, proposed = await _pinned_pair(owner, author)
    # A publish that would wait for the owner cannot carry the plan out: refused, not dropped.
    args = _inner_publish(await _head(owner, inner.tool_id), inner, proposed, syncWaitMs=18000)
    error = refused(
        await author.call_tool("workflow_binding_publish", args), "WORKFLOW_INPUT_INVALID"
    )
    assert "pass the plan to workflow_binding_decide" in error["error"]["message"]
    assert (await _head(owner, inner.tool_id)).get("pendingBindingId") is None
    await _assert_unmoved(owner, inner, outers, proposed)
    args = _inner_publish(await _head(owner, inner.tool_id), inner, syncWaitMs=18000)
    pending = ok(await author.call_tool("workflow_binding_publish", args))
    reject = {
        "hostId": HOST,
        "bindingId": pending["bindingId"],
        "expectedBindingDigest": pending["bindingDigest"],
        "decision": "reject",
        "comment": "not yet",
        "operationId": new_id(),
        "repinBindingIds": proposed,
    }
    error = refused(
        await owner.call_tool("workflow_binding_decide", reject), "WORKFLOW_INPUT_INVALID"
    )
    assert error["error"]["message"] == "repinBindingIds: a reject takes no plan"
    assert (await _head(owner, inner.tool_id))["pendingBindingId"] == pending["bindingId"]
    await _assert_unmoved(owner, inner, outers, proposed)


async def test_a_plan_racing_the_owners_own_approval_of_a_repin_approves_it_once(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity, db: Database
) -> None:
    author = client(http, dev_identity, "an-author", roles=("admin",))
    inner, outers, proposed = await _pinned_pair(owner, author)
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT binding_digest FROM workflow_tool_binding_t WHERE binding_id = %s",
            (proposed[0],),
        )
        pending = await cursor.fetchone()
    assert pending is not None
    decide = {
        "hostId": HOST,
        "bindingId": proposed[0],
        "expectedBindingDigest": pending["binding_digest"],
        "decision": "approve",
    }
    plan = _inner_publish(await _head(owner, inner.tool_id), inner, proposed)
    results = await asyncio.gather(
        *(
            owner.call_tool("workflow_binding_decide", dict(decide, operationId=new_id()))
            for _ in range(3)
        ),
        owner.call_tool("workflow_binding_publish", plan),
        *(
            owner.call_tool("workflow_binding_decide", dict(decide, operationId=new_id()))
            for _ in range(3)
        ),
    )
    # Whoever takes the outer Tool's head first approves the repin; every other call is refused.
    won = [ok(result) for result in results if not result["isError"]]
    for result in results:
        if result["isError"]:
            refused(result, "WORKFLOW_STATE_CONFLICT")
    assert len(won) == 1
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT count(*) AS n FROM workflow_tool_binding_decision_t"
            " WHERE binding_id = %s AND action = 'approve'",
            (proposed[0],),
        )
        approvals = await cursor.fetchone()
    assert approvals is not None and approvals["n"] == 1
    assert (await _head(owner, outers[0].tool_id))["activeBindingId"] == proposed[0]
    planned = won[0].get("repinnedBindingIds") == proposed
    inner_active = (await _head(owner, inner.tool_id))["activeBindingId"]
    assert (inner_active == won[0]["bindingId"]) is planned


async def _dropping_the_pin(author: McpTestClient, owner: McpTestClient, outer: Tool) -> str:
    """The author proposes the outer Tool without its dependency: pending the owner."""
    value = binding(outer.wf_def_id, outer.tool_id, outer.text, toolName="claims.outer")
    head = await _head(owner, outer.tool_id)
    proposed = ok(
        await author.call_tool(
            "workflow_binding_publish", publish_args(value, head["aggregateVersion"])
        )
    )
    assert proposed["status"] == "pendingApproval", proposed
    return str(proposed["bindingId"])


def _retire_args(head: dict[str, Any], tool: Tool, plan: list[str]) -> dict[str, Any]:
    args = {
        "hostId": HOST,
        "toolId": tool.tool_id,
        "expectedAggregateVersion": head["aggregateVersion"],
        "operationId": new_id(),
    }
    return args | ({"repinBindingIds": plan} if plan else {})


async def test_a_retirement_plan_approves_the_outer_tools_that_drop_the_pin_and_retires(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    author = client(http, dev_identity, "an-author", roles=("admin",))
    inner = await publish_tool(owner, toolName="claims.inner")
    outer = await publish_tool(owner, toolName="claims.outer")
    await _outer(owner, inner, "1.2.0", "claims.outer", outer)
    dropped = await _dropping_the_pin(author, owner, outer)
    head = await _head(owner, inner.tool_id)
    error = refused(
        await owner.call_tool("workflow_binding_retire", _retire_args(head, inner, [])),
        "WORKFLOW_STATE_CONFLICT",
    )
    assert _affected(error) == [("claims.outer", "1.2.0")]
    receipt = ok(
        await owner.call_tool("workflow_binding_retire", _retire_args(head, inner, [dropped]))
    )
    assert receipt["result"] == "retired" and receipt["repinnedBindingIds"] == [dropped]
    assert receipt["retiredBindingId"] == inner.binding_id
    assert (await _head(owner, inner.tool_id)).get("activeBindingId") is None
    outer_head = await _head(owner, outer.tool_id)
    assert outer_head["activeBindingId"] == dropped
    assert outer_head["decisions"][0]["action"] == "approve"


async def test_a_retirement_plan_whose_entry_still_pins_or_is_unrelated_is_refused_whole(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    author = client(http, dev_identity, "an-author", roles=("admin",))
    inner = await publish_tool(owner, toolName="claims.inner")
    outer = await publish_tool(owner, toolName="claims.outer")
    await _outer(owner, inner, "1.2.0", "claims.outer", outer)
    # A pending repin that still pins the inner Tool (at another version).
    value = binding(outer.wf_def_id, outer.tool_id, outer.text, toolName="claims.outer")
    outer_head = await _head(owner, outer.tool_id)
    args = publish_args(value, outer_head["aggregateVersion"], dependencies=[pin(inner, "1.3.0")])
    still = ok(await author.call_tool("workflow_binding_publish", args))
    assert still["status"] == "pendingApproval"
    # A pending revision of a Tool that never depended on the inner one.
    other = await publish_tool(owner, toolName="claims.other")
    value = binding(other.wf_def_id, other.tool_id, other.text, toolName="claims.other")
    value["syncWaitMs"] = 17000
    other_head = await _head(owner, other.tool_id)
    unrelated = ok(
        await author.call_tool(
            "workflow_binding_publish", publish_args(value, other_head["aggregateVersion"])
        )
    )
    assert unrelated["status"] == "pendingApproval"
    head = await _head(owner, inner.tool_id)
    for plan, words in (
        ([still["bindingId"]], "still pins the Tool being retired"),
        ([unrelated["bindingId"]], "does not pin the retiring one"),
        ([inner.binding_id], "not a pending revision of another Tool"),
    ):
        error = refused(
            await owner.call_tool("workflow_binding_retire", _retire_args(head, inner, plan)),
            "WORKFLOW_STATE_CONFLICT",
        )
        assert words in error["error"]["message"]
    assert await _head(owner, inner.tool_id) == head
    assert (await _head(owner, outer.tool_id))["pendingBindingId"] == still["bindingId"]
    assert (await _head(owner, other.tool_id))["pendingBindingId"] == unrelated["bindingId"]
