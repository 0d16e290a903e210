"""workflow_binding_publish: status rules, carry-over, the effect matrix, evidence, conflicts."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.errors import WorkflowError
from runtime.store import Database
from tests.support.binding_builders import (
    HOST,
    author_ctx,
    binding,
    definition_yaml,
    dependency,
    endpoint_target,
    new_id,
    owner_ctx,
    publish_args,
    publish_version,
    save_owner,
    write_binding,
)
from tests.support.service_calls import decide_binding, get_binding, publish_binding


async def _version(
    db: Database,
    wf_def_id: str | None = None,
    version: str = "1.2.0",
    *,
    approval: str = "carryOver",
    **options: Any,
) -> tuple[str, str]:
    if wf_def_id is None:
        wf_def_id = new_id()
        await save_owner(db, wf_def_id)
    text = definition_yaml(**options)
    await publish_version(db, wf_def_id, version, text=text, binding_approval=approval)
    return wf_def_id, text


async def _rejection(db: Database, ctx: Any, args: dict[str, Any]) -> WorkflowError:
    with pytest.raises(WorkflowError) as caught:
        await publish_binding(db, ctx, args)
    return caught.value


async def _head(db: Database, tool_id: str) -> dict[str, Any]:
    return await get_binding(db, owner_ctx(), {"hostId": HOST, "toolId": tool_id})


async def test_a_revision_by_someone_else_is_pending_until_the_owner_approves_the_reviewed_digest(
    db: Database,
) -> None:
    wf_def_id, text = await _version(db)
    tool_id = new_id()
    receipt = await publish_binding(
        db, author_ctx(), publish_args(binding(wf_def_id, tool_id, text), 0)
    )
    assert receipt["status"] == "pendingApproval"
    assert "decisionId" not in receipt
    assert (
        receipt["carryOverDeniedReason"]
        == "the Tool has no active revision whose approval could carry over"
    )
    head = await _head(db, tool_id)
    assert "activeBindingId" not in head and head["pendingBindingId"] == receipt["bindingId"]

    decide = {
        "hostId": HOST,
        "bindingId": receipt["bindingId"],
        "expectedBindingDigest": receipt["bindingDigest"],
        "decision": "approve",
        "operationId": new_id(),
    }
    with pytest.raises(WorkflowError) as not_owner:
        await decide_binding(db, author_ctx(), decide)
    assert not_owner.value.code == "WORKFLOW_POLICY_DENIED"
    with pytest.raises(WorkflowError) as stale:
        await decide_binding(
            db,
            owner_ctx(),
            {**decide, "expectedBindingDigest": "sha256:" + "0" * 64, "operationId": new_id()},
        )
    assert stale.value.code == "WORKFLOW_DEFINITION_MISMATCH"
    assert "activeBindingId" not in await _head(db, tool_id)

    approved = await decide_binding(db, owner_ctx(), decide)
    assert (approved["result"], approved["status"], approved["aggregateVersion"]) == (
        "approved",
        "active",
        2,
    )
    head = await _head(db, tool_id)
    assert head["activeBindingId"] == receipt["bindingId"] and "pendingBindingId" not in head
    assert [d["action"] for d in head["decisions"]] == ["approve"]


async def test_a_name_only_change_keeps_the_approval_active_by_carry_over(db: Database) -> None:
    wf_def_id, text = await _version(db)
    tool_id = new_id()
    first = await publish_binding(
        db, owner_ctx(), publish_args(binding(wf_def_id, tool_id, text), 0)
    )
    renamed = binding(
        wf_def_id, tool_id, text, toolName="claims.summary", toolDescription="Renamed"
    )
    receipt = await publish_binding(db, author_ctx(), publish_args(renamed, 1))
    assert (receipt["result"], receipt["status"]) == ("published", "active")
    assert receipt["approvalDigest"] == first["approvalDigest"]
    assert receipt["bindingDigest"] != first["bindingDigest"]
    head = await _head(db, tool_id)
    assert head["activeBindingId"] == receipt["bindingId"]
    assert head["revision"]["approvalBasisId"] == first["bindingId"]
    assert [d["action"] for d in head["decisions"]][:2] == ["carryOver", "supersede"]


async def test_a_read_only_tool_reaching_a_write_dependency_is_rejected(db: Database) -> None:
    wf_def_id, text = await _version(db, mcp_tool="accounts.update")
    args = publish_args(
        binding(wf_def_id, new_id(), text),
        0,
        dependencies=[dependency("accounts.update", read_only=False)],
    )
    error = await _rejection(db, owner_ctx(), args)
    assert "read-only Tool" in error.message


async def test_a_write_tool_with_evidence_is_admitted_and_gets_one_evidence_row_per_write_task(
    db: Database,
) -> None:
    wf_def_id, text = await _version(db, write=True)
    tool_id = new_id()
    args = publish_args(
        write_binding(wf_def_id, tool_id, text), 0, endpoint_targets=[endpoint_target()]
    )
    receipt = await publish_binding(db, owner_ctx(), args)
    assert receipt["status"] == "active"
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT task_name, evidence_digest, approved_by FROM workflow_tool_approval_evidence_t"
            " WHERE binding_id = %(id)s",
            {"id": receipt["bindingId"]},
        )
        rows = await cursor.fetchall()
    assert rows == [
        {"task_name": "save", "evidence_digest": "sha256:" + "e" * 64, "approved_by": "owner-1"}
    ]
    head = await _head(db, tool_id)
    target = head["revision"]["reach"]["endpointTargets"][0]
    assert target["allowedMethods"] == ["GET", "POST"] and target["environments"] == ["dev", "prod"]


async def test_a_write_task_without_evidence_metadata_fails_publish(db: Database) -> None:
    wf_def_id, text = await _version(db, write=True, evidence=False)
    error = await _rejection(
        db,
        owner_ctx(),
        publish_args(
            write_binding(wf_def_id, new_id(), text), 0, endpoint_targets=[endpoint_target()]
        ),
    )
    assert "approvalEvidenceDigest" in error.message


async def test_publishing_the_same_payload_twice_returns_unchanged(db: Database) -> None:
    wf_def_id, text = await _version(db)
    tool_id = new_id()
    value = binding(wf_def_id, tool_id, text)
    first = await publish_binding(db, owner_ctx(), publish_args(value, 0))
    again = await publish_binding(db, owner_ctx(), publish_args(value, 1))
    assert again["result"] == "unchanged"
    assert (again["bindingId"], again["aggregateVersion"]) == (first["bindingId"], 1)


async def test_a_stale_expected_version_is_a_stored_version_conflict(db: Database) -> None:
    wf_def_id, text = await _version(db)
    tool_id = new_id()
    await publish_binding(db, owner_ctx(), publish_args(binding(wf_def_id, tool_id, text), 0))
    args = publish_args(binding(wf_def_id, tool_id, text, syncWaitMs=10000), 0)
    error = await _rejection(db, owner_ctx(), args)
    assert error.code == "VERSION_CONFLICT"
    assert error.details == {"aggregateVersion": 1}
    replay = await _rejection(db, owner_ctx(), args)
    assert replay.to_structured() == error.to_structured()


async def test_a_negative_expected_version_is_stored_with_version_one_evidence_and_replayed(
    db: Database,
) -> None:
    wf_def_id, text = await _version(db)
    args = publish_args(binding(wf_def_id, new_id(), text), -1)
    error = await _rejection(db, owner_ctx(), args)
    assert error.details == {
        "requestValidation": {
            "version": 1,
            "discriminator": "negativeExpectedAggregateVersion",
            "operationId": args["operationId"],
            "toolName": "workflow_binding_publish",
        }
    }
    replay = await _rejection(db, owner_ctx(), args)
    assert replay.to_structured() == error.to_structured()
    other = await _rejection(db, owner_ctx(), {**args, "expectedAggregateVersion": 0})
    assert other.code == "WORKFLOW_IDEMPOTENCY_CONFLICT"


async def test_a_duplicate_endpoint_ref_is_rejected_with_binding_reach_evidence(
    db: Database,
) -> None:
    wf_def_id, text = await _version(db)
    args = publish_args(
        binding(wf_def_id, new_id(), text),
        0,
        endpoint_targets=[endpoint_target(), endpoint_target()],
    )
    error = await _rejection(db, owner_ctx(), args)
    assert error.details is not None
    evidence = error.details["requestValidation"]
    assert (evidence["discriminator"], evidence["requestSection"]) == ("bindingReach", "reach")
    replay = await _rejection(db, owner_ctx(), args)
    assert replay.to_structured() == error.to_structured()


async def test_a_state_dependent_rejection_is_not_stored_so_a_retry_runs_afresh(
    db: Database,
) -> None:
    wf_def_id = new_id()
    await save_owner(db, wf_def_id)
    text = definition_yaml()
    args = publish_args(binding(wf_def_id, new_id(), text), 0)
    error = await _rejection(db, owner_ctx(), args)
    assert error.code == "WORKFLOW_NOT_FOUND"
    await publish_version(db, wf_def_id, text=text)
    receipt = await publish_binding(db, owner_ctx(), args)
    assert receipt["status"] == "active"


async def test_a_retried_publish_returns_the_stored_receipt(db: Database) -> None:
    wf_def_id, text = await _version(db)
    args = publish_args(binding(wf_def_id, new_id(), text), 0)
    first = await publish_binding(db, author_ctx(), args)
    assert await publish_binding(db, author_ctx(), args) == first
    with pytest.raises(WorkflowError) as other_user:
        await publish_binding(db, author_ctx("someone-else"), args)
    assert other_user.value.code == "WORKFLOW_POLICY_DENIED"


def _rules(error: WorkflowError) -> list[str]:
    return [problem["rule"] for problem in (error.details or {}).get("problems", [])]


@pytest.mark.requirement("001:Delegation And Cycle Prevention")
async def test_a_tool_whose_workflow_calls_the_tool_itself_is_refused_at_publish(
    db: Database,
) -> None:
    # Seed 001 Phase 1 gate: recursive workflow-tool dependencies are rejected.
    wf_def_id, text = await _version(db, mcp_tool="tools.self")
    itself = dependency("tools.self")
    args = publish_args(binding(wf_def_id, itself["nestedToolId"], text), 0, dependencies=[itself])
    error = await _rejection(db, owner_ctx(), args)
    assert error.code == "WORKFLOW_INPUT_INVALID"
    assert _rules(error) == ["recursive-dependency"]
    assert error.details["problems"][0]["pointer"] == "/dependencies/0/nestedToolId"


@pytest.mark.requirement("001:Delegation And Cycle Prevention")
async def test_a_cycle_across_two_workflow_backed_tools_is_refused_when_it_would_close(
    db: Database,
) -> None:
    to_b, to_a = dependency("tools.b"), dependency("tools.a")
    a_def, a_text = await _version(db, mcp_tool="tools.b")
    first = await publish_binding(
        db,
        owner_ctx(),
        publish_args(binding(a_def, to_a["nestedToolId"], a_text), 0, dependencies=[to_b]),
    )
    assert first["status"] == "active"
    b_def, b_text = await _version(db, mcp_tool="tools.a")
    closing = publish_args(binding(b_def, to_b["nestedToolId"], b_text), 0, dependencies=[to_a])
    error = await _rejection(db, owner_ctx(), closing)
    assert _rules(error) == ["dependency-cycle"]
    assert to_a["nestedToolId"] in error.details["problems"][0]["message"]
    # Without the edge back, B publishes.
    b_alone, b_text2 = await _version(db, mcp_tool="tools.c")
    ok = publish_args(
        binding(b_alone, to_b["nestedToolId"], b_text2), 0, dependencies=[dependency("tools.c")]
    )
    assert (await publish_binding(db, owner_ctx(), ok))["status"] == "active"
