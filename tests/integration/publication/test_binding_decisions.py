"""Owner decisions, revocation, retirement, definition-retire and ownership hooks, history."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from runtime.errors import WorkflowError
from runtime.store import Database
from tests.support.binding_builders import (
    HOST,
    author_ctx,
    binding,
    definition_yaml,
    new_id,
    owner_ctx,
    publish_args,
    publish_version,
    save_owner,
)
from tests.support.service_calls import (
    decide_binding,
    get_binding,
    list_bindings,
    publish_binding,
    retire_binding,
    revoke_binding,
)


async def _published(db: Database, *, by_owner: bool) -> tuple[str, str, dict[str, Any]]:
    wf_def_id = new_id()
    await save_owner(db, wf_def_id)
    text = definition_yaml()
    await publish_version(db, wf_def_id, text=text)
    tool_id = new_id()
    ctx = owner_ctx() if by_owner else author_ctx()
    receipt = await publish_binding(db, ctx, publish_args(binding(wf_def_id, tool_id, text), 0))
    return wf_def_id, tool_id, receipt


def _decide(receipt: dict[str, Any], decision: str, **extra: Any) -> dict[str, Any]:
    return {
        "hostId": HOST,
        "bindingId": receipt["bindingId"],
        "expectedBindingDigest": receipt["bindingDigest"],
        "decision": decision,
        "operationId": new_id(),
        **extra,
    }


async def test_reject_requires_a_comment_and_records_it(db: Database) -> None:
    _, tool_id, receipt = await _published(db, by_owner=False)
    with pytest.raises(WorkflowError) as caught:
        await decide_binding(db, owner_ctx(), _decide(receipt, "reject"))
    assert caught.value.code == "WORKFLOW_INPUT_INVALID"
    rejected = await decide_binding(db, owner_ctx(), _decide(receipt, "reject", comment="too slow"))
    assert (rejected["result"], rejected["status"]) == ("rejected", "rejected")
    got = await get_binding(db, author_ctx(), {"hostId": HOST, "toolId": tool_id})
    assert got["revision"]["status"] == "rejected"
    assert got["decisions"][0]["comment"] == "too slow"
    with pytest.raises(WorkflowError) as again:
        await decide_binding(db, owner_ctx(), _decide(receipt, "approve"))
    assert again.value.code == "WORKFLOW_STATE_CONFLICT"


async def test_the_owner_revokes_the_active_revision_with_a_reason(db: Database) -> None:
    _, tool_id, receipt = await _published(db, by_owner=True)
    args = {
        "hostId": HOST,
        "bindingId": receipt["bindingId"],
        "expectedBindingDigest": receipt["bindingDigest"],
        "comment": "abuse",
        "operationId": new_id(),
    }
    with pytest.raises(WorkflowError) as not_owner:
        await revoke_binding(db, author_ctx(), args)
    assert not_owner.value.code == "WORKFLOW_POLICY_DENIED"
    revoked = await revoke_binding(db, owner_ctx(), args)
    assert (revoked["status"], revoked["aggregateVersion"]) == ("revoked", 2)
    got = await get_binding(db, owner_ctx(), {"hostId": HOST, "toolId": tool_id})
    assert "activeBindingId" not in got
    assert got["revision"]["status"] == "revoked"


async def test_retire_moves_active_to_retired_and_pending_to_withdrawn(db: Database) -> None:
    wf_def_id, tool_id, active = await _published(db, by_owner=True)
    text = definition_yaml()
    pending = await publish_binding(
        db, author_ctx(), publish_args(binding(wf_def_id, tool_id, text, syncWaitMs=1000), 1)
    )
    assert pending["status"] == "pendingApproval"
    args = {
        "hostId": HOST,
        "toolId": tool_id,
        "expectedAggregateVersion": 2,
        "operationId": new_id(),
    }
    receipt = await retire_binding(db, author_ctx(), args)
    assert receipt == {
        "result": "retired",
        "toolId": tool_id,
        "retiredBindingId": active["bindingId"],
        "withdrawnBindingId": pending["bindingId"],
        "aggregateVersion": 3,
    }
    again = {**args, "expectedAggregateVersion": 3, "operationId": new_id()}
    assert (await retire_binding(db, author_ctx(), again))["result"] == "unchanged"


async def test_a_negative_expected_version_on_retire_carries_version_one_evidence(
    db: Database,
) -> None:
    args = {
        "hostId": HOST,
        "toolId": new_id(),
        "expectedAggregateVersion": -5,
        "operationId": new_id(),
    }
    with pytest.raises(WorkflowError) as caught:
        await retire_binding(db, author_ctx(), args)
    assert caught.value.details is not None
    assert caught.value.details["requestValidation"]["toolName"] == "workflow_binding_retire"


async def test_the_decision_history_refuses_update_and_delete_for_the_runtime_role(
    db: Database,
) -> None:
    await _published(db, by_owner=True)
    for statement in (
        "UPDATE workflow_tool_binding_decision_t SET comment = 'rewritten'",
        "DELETE FROM workflow_tool_binding_decision_t",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with db.transaction() as conn:
                await conn.execute(statement)


async def test_revision_fields_and_reach_are_immutable(db: Database) -> None:
    _, _, receipt = await _published(db, by_owner=True)
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation):
        async with db.transaction() as conn:
            await conn.execute(
                "UPDATE workflow_tool_binding_t SET sync_wait_ms = 1 WHERE binding_id = %(id)s",
                {"id": receipt["bindingId"]},
            )
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        async with db.transaction() as conn:
            await conn.execute("DELETE FROM workflow_tool_approval_evidence_t")


async def test_list_shows_pending_revisions_to_the_owner_and_the_requester(db: Database) -> None:
    wf_def_id, _, pending = await _published(db, by_owner=False)
    owner_view = await list_bindings(db, owner_ctx(), {"hostId": HOST, "role": "owner"})
    assert [item["bindingId"] for item in owner_view["items"]] == [pending["bindingId"]]
    assert owner_view["pendingCounts"] == [{"wfDefId": wf_def_id, "pendingCount": 1}]
    mine = await list_bindings(db, author_ctx(), {"hostId": HOST, "role": "requester"})
    assert mine["pendingCount"] == 1
    nobody = await list_bindings(db, author_ctx(), {"hostId": HOST, "role": "owner"})
    assert nobody["items"] == [] and nobody["pendingCount"] == 0


async def test_list_pages_with_a_cursor(db: Database) -> None:
    for _ in range(3):
        await _published(db, by_owner=False)
    first = await list_bindings(db, author_ctx(), {"hostId": HOST, "role": "requester", "limit": 2})
    assert len(first["items"]) == 2 and "nextCursor" in first
    rest = await list_bindings(
        db,
        author_ctx(),
        {"hostId": HOST, "role": "requester", "limit": 2, "cursor": first["nextCursor"]},
    )
    assert len(rest["items"]) == 1 and "nextCursor" not in rest
    ids = {item["bindingId"] for item in first["items"] + rest["items"]}
    assert len(ids) == 3
