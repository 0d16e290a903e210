"""Owner decisions on binding revisions (decide, revoke) and Tool retirement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UNSET

from generated.models import (
    WorkflowBindingDecideInput,
    WorkflowBindingDecideOutput,
    WorkflowBindingRetireInput,
    WorkflowBindingRetireOutput,
    WorkflowBindingRevokeInput,
    WorkflowBindingRevokeOutput,
)
from runtime.errors import WorkflowError
from runtime.publication.bindings.approval import (
    active_version,
    approve_reviewed,
    close_with_decision,
    comment_of,
    decision_receipt,
    lock_reviewed_revision,
    revalidate,
)
from runtime.publication.bindings.destination_policy import DestinationPolicy
from runtime.publication.bindings.rejections import (
    is_final_rejection,
    negative_version_error,
    version_conflict,
)
from runtime.publication.promotion.dependents import refuse_stranding
from runtime.publication.promotion.plan import (
    Plan,
    approve_plan,
    approve_retirement_plan,
    plan_of,
    refuse_unused_plan,
)
from runtime.publication.receipt_ledger import run_operation
from runtime.publication.store import binding_rows
from runtime.security import InvocationContext
from runtime.store import Connection, Database


async def _decide(
    conn: Connection,
    ctx: InvocationContext,
    request: WorkflowBindingDecideInput,
    policy: DestinationPolicy,
    parallelism_ceiling: int | None,
) -> WorkflowBindingDecideOutput:
    binding_id, decision, operation_id = request.binding_id, request.decision, request.operation_id
    comment = comment_of(request.comment, required=decision == "reject")
    reviewed = await lock_reviewed_revision(conn, ctx, binding_id, request.expected_binding_digest)
    revision, head = reviewed.revision, reviewed.head
    if revision.revision_status != "pendingApproval":
        raise WorkflowError("WORKFLOW_STATE_CONFLICT", "the revision is no longer pending approval")
    if decision == "approve":
        await revalidate(conn, ctx, reviewed, policy, parallelism_ceiling)
        plan = plan_of(
            request.repin_binding_ids, policy, parallelism_ceiling, comment, operation_id
        )
        repinned = await approve_plan(
            conn, ctx, plan, tool_id=revision.tool_id, version=revision.workflow_version
        )
        # approve_reviewed runs the reverse gate after the plan moved the outer Tools.
        receipt = await approve_reviewed(conn, ctx, reviewed, comment, operation_id)
        return msgspec.structs.replace(receipt, repinned_binding_ids=repinned or UNSET)
    decision_id = await close_with_decision(
        conn,
        ctx,
        binding_id,
        status="rejected",
        action="reject",
        operation_id=operation_id,
        comment=comment,
    )
    assert decision_id is not None
    version = await binding_rows.advance_head(
        conn,
        ctx.host_id,
        revision.tool_id,
        active_binding_id=head.active_binding_id,
        pending_binding_id=None,
    )
    return decision_receipt("rejected", "rejected", revision, decision_id, version)


async def decide_binding(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowBindingDecideInput,
    arguments: Mapping[str, Any],
    *,
    policy: DestinationPolicy | None = None,
    maximum_parallelism: int | None = None,
) -> WorkflowBindingDecideOutput:
    """workflow_binding_decide: the stored definition owner approves or rejects a pending revision.

    approve revalidates inside the transaction (every problem at once, against the current
    destination policy and parallelism ceiling) and supersedes the previous active revision;
    reject requires a comment. expectedBindingDigest pins the revision the owner reviewed.
    """
    comment_of(request.comment, required=request.decision == "reject")
    if request.decision == "reject":
        refuse_unused_plan(request.repin_binding_ids, "a reject takes no plan")
    destination_policy = policy or DestinationPolicy()

    async def perform(conn: Connection) -> WorkflowBindingDecideOutput:
        return await _decide(conn, ctx, request, destination_policy, maximum_parallelism)

    return await run_operation(
        db,
        ctx,
        request,
        tool_name="workflow_binding_decide",
        arguments=arguments,
        perform=perform,
        output=WorkflowBindingDecideOutput,
        is_final=is_final_rejection,
    )


async def _revoke(
    conn: Connection, ctx: InvocationContext, request: WorkflowBindingRevokeInput
) -> WorkflowBindingRevokeOutput:
    binding_id, operation_id = request.binding_id, request.operation_id
    comment = comment_of(request.comment, required=True)
    reviewed = await lock_reviewed_revision(conn, ctx, binding_id, request.expected_binding_digest)
    revision, head = reviewed.revision, reviewed.head
    if revision.revision_status != "approved":
        raise WorkflowError("WORKFLOW_STATE_CONFLICT", "only the active revision can be revoked")
    decision_id = await close_with_decision(
        conn,
        ctx,
        binding_id,
        status="revoked",
        action="revoke",
        operation_id=operation_id,
        comment=comment,
    )
    assert decision_id is not None
    version = await binding_rows.advance_head(
        conn,
        ctx.host_id,
        revision.tool_id,
        active_binding_id=None,
        pending_binding_id=head.pending_binding_id,
    )
    return WorkflowBindingRevokeOutput(
        result="revoked",
        status="revoked",
        tool_id=revision.tool_id,
        binding_id=binding_id,
        binding_digest=revision.binding_digest,
        decision_id=decision_id,
        aggregate_version=version,
    )


async def revoke_binding(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowBindingRevokeInput,
    arguments: Mapping[str, Any],
) -> WorkflowBindingRevokeOutput:
    """workflow_binding_revoke: the stored owner revokes the active revision (reason required)."""
    comment_of(request.comment, required=True)

    async def perform(conn: Connection) -> WorkflowBindingRevokeOutput:
        return await _revoke(conn, ctx, request)

    return await run_operation(
        db,
        ctx,
        request,
        tool_name="workflow_binding_revoke",
        arguments=arguments,
        perform=perform,
        output=WorkflowBindingRevokeOutput,
        is_final=is_final_rejection,
    )


async def _retire(
    conn: Connection,
    ctx: InvocationContext,
    request: WorkflowBindingRetireInput,
    plan: Plan,
) -> WorkflowBindingRetireOutput:
    tool_id, operation_id, comment = request.tool_id, request.operation_id, plan.comment
    expected = request.expected_aggregate_version
    if expected < 0:
        raise negative_version_error(operation_id, "workflow_binding_retire")
    head = await binding_rows.lock_head(conn, ctx.host_id, tool_id)
    if expected != head.aggregate_version:
        raise version_conflict(head.aggregate_version)
    if head.active_binding_id is None and head.pending_binding_id is None:
        refuse_unused_plan(request.repin_binding_ids, "the Tool has nothing to retire")
        return WorkflowBindingRetireOutput(
            result="unchanged", tool_id=tool_id, aggregate_version=head.aggregate_version
        )
    current = await active_version(conn, ctx.host_id, head)
    repinned = await approve_retirement_plan(
        conn, ctx, plan, tool_id=tool_id, active_version=current
    )
    await refuse_stranding(
        conn,
        ctx.host_id,
        tool_id,
        current_version=current,
        next_version=None,
        doing="retiring the Tool",
    )
    closed: dict[str, str] = {}
    closing: tuple[tuple[str | None, binding_rows.StoredStatus, binding_rows.DecisionAction], ...]
    closing = (
        (head.active_binding_id, "retired", "retire"),
        (head.pending_binding_id, "withdrawn", "withdraw"),
    )
    for binding_id, status, action in closing:
        if binding_id is not None:
            await close_with_decision(
                conn,
                ctx,
                binding_id,
                status=status,
                action=action,
                operation_id=operation_id,
                comment=comment,
            )
            closed[status] = binding_id
    version = await binding_rows.advance_head(
        conn, ctx.host_id, tool_id, active_binding_id=None, pending_binding_id=None
    )
    return WorkflowBindingRetireOutput(
        result="retired",
        tool_id=tool_id,
        aggregate_version=version,
        retired_binding_id=closed.get("retired", UNSET),
        withdrawn_binding_id=closed.get("withdrawn", UNSET),
        repinned_binding_ids=repinned or UNSET,
    )


async def retire_binding(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowBindingRetireInput,
    arguments: Mapping[str, Any],
    *,
    policy: DestinationPolicy | None = None,
    maximum_parallelism: int | None = None,
) -> WorkflowBindingRetireOutput:
    """workflow_binding_retire: the active revision becomes retired, a pending one withdrawn.

    repinBindingIds (the plan) approves, in the same transaction, pending revisions of the
    Tools that pin the retiring one and no longer do; the reverse gate then runs as before.
    """
    comment = comment_of(request.comment, required=False)
    destination_policy = policy or DestinationPolicy()

    async def perform(conn: Connection) -> WorkflowBindingRetireOutput:
        plan = plan_of(
            request.repin_binding_ids,
            destination_policy,
            maximum_parallelism,
            comment,
            request.operation_id,
        )
        return await _retire(conn, ctx, request, plan)

    return await run_operation(
        db,
        ctx,
        request,
        tool_name="workflow_binding_retire",
        arguments=arguments,
        perform=perform,
        output=WorkflowBindingRetireOutput,
        is_final=is_final_rejection,
    )
