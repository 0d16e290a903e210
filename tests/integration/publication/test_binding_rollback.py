"""workflow_binding_rollback through POST /mcp: the previous approved revision serves again."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import httpx
import pytest

from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.binding_builders import HOST, binding, definition_yaml, new_id, publish_args
from tests.support.invocation import (
    Tool,
    client,
    invoke_args,
    ok,
    publish_tool,
    refused,
    running_executor,
)
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("001:Publication, Versioning, And Rollback")


def rollback_args(tool_id: str, expected: str, comment: str = "1.3.0 is wrong") -> dict[str, Any]:
    """workflow_binding_rollback arguments (a fresh operation)."""
    return {
        "hostId": HOST,
        "toolId": tool_id,
        "expectedBindingDigest": expected,
        "comment": comment,
        "operationId": new_id(),
    }


async def _two_revisions(owner: McpTestClient, **changes: Any) -> tuple[Tool, Tool]:
    """A Tool on version 1.2.0 (marker 1), then promoted to 1.3.0 (marker 2) with changes."""
    older = await publish_tool(owner)
    newer = await publish_tool(
        owner,
        text=definition_yaml(marker=2),
        tool_id=older.tool_id,
        wf_def_id=older.wf_def_id,
        version="1.3.0",
        expected_version=older.aggregate_version,
        **changes,
    )
    return older, newer


async def _head(owner: McpTestClient, tool_id: str) -> dict[str, Any]:
    return ok(await owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool_id}))


async def test_a_run_in_flight_finishes_on_its_revision_and_the_next_call_uses_the_rolled_back_one(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    older, newer = await _two_revisions(owner, syncWaitMs=100)
    # No executor yet: the run of 1.3.0 is admitted and stays in flight through the rollback.
    pending = refused(
        await caller.call_tool("workflow_invoke", invoke_args(newer)), "WORKFLOW_TIMEOUT"
    )
    receipt = ok(
        await owner.call_tool(
            "workflow_binding_rollback", rollback_args(newer.tool_id, newer.binding_digest)
        )
    )
    assert receipt["result"] == "rolledBack" and receipt["status"] == "active"
    assert receipt["restoredBindingId"] == older.binding_id
    assert receipt["supersededBindingId"] == newer.binding_id
    assert receipt["bindingId"] not in (older.binding_id, newer.binding_id)
    assert receipt["bindingDigest"] == older.binding_digest
    assert receipt["workflowVersion"] == "1.2.0"
    assert receipt["definitionDigest"] == older.definition_digest
    async with running_executor(services):
        waited = ok(
            await caller.call_tool(
                "workflow_wait_result", {"workflowInstanceId": pending["workflowInstanceId"]}
            )
        )
        assert waited["state"] == "COMPLETED"
        assert waited["output"]["marker"] == 2
        assert waited["definitionDigest"] == newer.definition_digest
        # The Gateway's snapshot follows the rollback: the restored digests are served again.
        restored = dataclasses.replace(older, binding_id=receipt["bindingId"])
        after = ok(await caller.call_tool("workflow_invoke", invoke_args(restored)))
        assert after["output"]["marker"] == 1
    refused(
        await caller.call_tool("workflow_invoke", invoke_args(newer)),
        "WORKFLOW_DEFINITION_MISMATCH",
    )


async def test_the_history_keeps_every_revision_and_names_the_rollback_and_its_reason(
    owner: McpTestClient,
) -> None:
    older, newer = await _two_revisions(owner)
    args = rollback_args(newer.tool_id, newer.binding_digest, "refunds doubled in 1.3.0")
    receipt = ok(await owner.call_tool("workflow_binding_rollback", args))
    head = await _head(owner, newer.tool_id)
    assert head["activeBindingId"] == receipt["bindingId"]
    assert head["aggregateVersion"] == receipt["aggregateVersion"]
    assert head["revision"]["approvalBasisId"] == older.binding_id
    assert head["revision"]["status"] == "active"
    latest = head["decisions"][:2]
    assert [d["action"] for d in latest] == ["rollback", "supersede"]
    assert [d["comment"] for d in latest] == ["refunds doubled in 1.3.0"] * 2
    assert latest[0]["bindingId"] == receipt["bindingId"]
    assert latest[1]["bindingId"] == newer.binding_id
    old = ok(
        await owner.call_tool(
            "workflow_binding_get",
            {"hostId": HOST, "toolId": newer.tool_id, "bindingId": older.binding_id},
        )
    )
    assert old["revision"]["status"] == "superseded"


async def test_a_stale_digest_is_a_conflict_and_changes_nothing(owner: McpTestClient) -> None:
    older, newer = await _two_revisions(owner)
    before = await _head(owner, newer.tool_id)
    error = refused(
        await owner.call_tool(
            "workflow_binding_rollback", rollback_args(newer.tool_id, older.binding_digest)
        ),
        "WORKFLOW_STATE_CONFLICT",
    )
    assert error["error"]["details"]["bindingDigest"] == newer.binding_digest
    assert await _head(owner, newer.tool_id) == before


async def test_rolling_back_twice_returns_to_the_newer_revision(owner: McpTestClient) -> None:
    _older, newer = await _two_revisions(owner)
    first = ok(
        await owner.call_tool(
            "workflow_binding_rollback", rollback_args(newer.tool_id, newer.binding_digest)
        )
    )
    second = ok(
        await owner.call_tool(
            "workflow_binding_rollback", rollback_args(newer.tool_id, first["bindingDigest"])
        )
    )
    assert second["restoredBindingId"] == newer.binding_id
    assert second["bindingDigest"] == newer.binding_digest


async def test_a_tool_with_one_approved_revision_has_nothing_to_roll_back_to(
    owner: McpTestClient,
) -> None:
    tool = await publish_tool(owner)
    error = refused(
        await owner.call_tool(
            "workflow_binding_rollback", rollback_args(tool.tool_id, tool.binding_digest)
        ),
        "WORKFLOW_STATE_CONFLICT",
    )
    assert "no earlier approved revision" in error["error"]["message"]


async def test_only_the_definition_owner_rolls_back(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    _older, newer = await _two_revisions(owner)
    admin = client(http, dev_identity, "not-the-owner", roles=("admin",))
    refused(
        await admin.call_tool(
            "workflow_binding_rollback", rollback_args(newer.tool_id, newer.binding_digest)
        ),
        "WORKFLOW_POLICY_DENIED",
    )
    reader = client(http, dev_identity, "owner-without-role", roles=("user",))
    refused(
        await reader.call_tool(
            "workflow_binding_rollback", rollback_args(newer.tool_id, newer.binding_digest)
        ),
        "WORKFLOW_POLICY_DENIED",
    )
    assert (await _head(owner, newer.tool_id))["activeBindingId"] == newer.binding_id


async def test_a_revoked_revision_is_never_restored(owner: McpTestClient) -> None:
    older = await publish_tool(owner)
    revoke = {
        "hostId": HOST,
        "bindingId": older.binding_id,
        "expectedBindingDigest": older.binding_digest,
        "comment": "unsafe",
        "operationId": new_id(),
    }
    ok(await owner.call_tool("workflow_binding_revoke", revoke))
    value = binding(older.wf_def_id, older.tool_id, older.text, syncWaitMs=1000)
    head = await _head(owner, older.tool_id)
    republished = ok(
        await owner.call_tool(
            "workflow_binding_publish", publish_args(value, head["aggregateVersion"])
        )
    )
    assert republished["status"] == "active"
    error = refused(
        await owner.call_tool(
            "workflow_binding_rollback",
            rollback_args(older.tool_id, republished["bindingDigest"]),
        ),
        "WORKFLOW_STATE_CONFLICT",
    )
    assert "no earlier approved revision" in error["error"]["message"]


@pytest.mark.requirement("000:Concurrency")
async def test_racing_rollbacks_of_one_digest_restore_once_and_the_rest_conflict(
    owner: McpTestClient, db: Database
) -> None:
    older, newer = await _two_revisions(owner)
    results = await asyncio.gather(
        *(
            owner.call_tool(
                "workflow_binding_rollback", rollback_args(newer.tool_id, newer.binding_digest)
            )
            for _ in range(8)
        )
    )
    won = [ok(result) for result in results if not result["isError"]]
    lost = [refused(result, "WORKFLOW_STATE_CONFLICT") for result in results if result["isError"]]
    assert len(won) == 1 and len(lost) == 7
    assert won[0]["restoredBindingId"] == older.binding_id
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT action, count(*) AS n FROM workflow_tool_binding_decision_t"
            " WHERE tool_id = %s GROUP BY action",
            (newer.tool_id,),
        )
        actions = {row["action"]: row["n"] for row in await cursor.fetchall()}
        cursor = await conn.execute(
            "SELECT count(*) AS n FROM workflow_tool_binding_t WHERE tool_id = %s AND active",
            (newer.tool_id,),
        )
        active = await cursor.fetchone()
    assert actions["rollback"] == 1
    assert active is not None and active["n"] == 1
    head = await _head(owner, newer.tool_id)
    assert head["activeBindingId"] == won[0]["bindingId"]


async def test_a_non_owner_with_a_stale_digest_is_denied_without_learning_the_active_one(
    owner: McpTestClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    older, newer = await _two_revisions(owner)
    admin = client(http, dev_identity, "not-the-owner", roles=("admin",))
    denied = refused(
        await admin.call_tool(
            "workflow_binding_rollback", rollback_args(newer.tool_id, older.binding_digest)
        ),
        "WORKFLOW_POLICY_DENIED",
    )
    assert newer.binding_digest not in str(denied)
