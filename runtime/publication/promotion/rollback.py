"""workflow_binding_rollback: the previous approved revision becomes active again, as a new one.

Seed 001 "Rollback republishes the previous approved binding. It does not mutate or delete
historical definitions or running instances." The restored binding is copied into a new
revision (approvalBasisId names the one it restores), so the history reads forward: the active
revision is superseded, the new one records a `rollback` decision with the reason. Runs in
flight keep the revision they pinned at admission; admission's head check makes the next call
use the new one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from generated.models import WorkflowBindingRollbackInput, WorkflowBindingRollbackOutput
from runtime.errors import WorkflowError
from runtime.publication.bindings.approval import (
    Reviewed,
    close_with_decision,
    comment_of,
    revalidate,
)
from runtime.publication.bindings.destination_policy import DestinationPolicy
from runtime.publication.bindings.rejections import is_final_rejection, not_found
from runtime.publication.bindings.status_rules import current_owner, require_owner
from runtime.publication.promotion.dependents import refuse_stranding
from runtime.publication.promotion.plan import approve_plan, plan_of
from runtime.publication.receipt_ledger import run_operation
from runtime.publication.store import binding_rows, definition_rows, lineage_rows
from runtime.publication.store.binding_rows import StoredRevision
from runtime.security import InvocationContext
from runtime.store import Connection, Database


def _conflict(message: str, **details: Any) -> WorkflowError:
    return WorkflowError("WORKFLOW_STATE_CONFLICT", message, details=details or None)


def _stale_digest(active: StoredRevision) -> WorkflowError:
    return _conflict(
        "expectedBindingDigest is not the active revision's bindingDigest",
        bindingDigest=active.binding_digest,
        activeBindingId=active.binding_id,
    )


@dataclass(frozen=True, slots=True)
class _Pair:
    """The active revision and the one a rollback restores, read before any lock."""

    active: StoredRevision
    restored: StoredRevision


async def _read_pair(
    conn: Connection, ctx: InvocationContext, tool_id: str, expected: str
) -> _Pair:
    head = await binding_rows.read_head(conn, ctx.host_id, tool_id)
    if head is None:
        raise not_found("binding publication for that toolId")
    if head.active_binding_id is None:
        raise _conflict("the Tool has no active revision to roll back")
    active = await binding_rows.select_revision(conn, ctx.host_id, head.active_binding_id)
    assert active is not None  # the head references its revisions
    # Only the owner learns the active digest or whether an earlier revision exists.
    require_owner(ctx, await current_owner(conn, ctx.host_id, active.wf_def_id))
    if active.binding_digest != expected:
        raise _stale_digest(active)
    candidate = await lineage_rows.select_rollback_candidate(
        conn, ctx.host_id, tool_id, active.binding_digest
    )
    if candidate is None:
        raise _conflict("the Tool has no earlier approved revision to roll back to")
    restored = await binding_rows.select_revision(conn, ctx.host_id, candidate)
    assert restored is not None
    return _Pair(active, restored)


async def _lock(conn: Connection, ctx: InvocationContext, pair: _Pair, expected: str) -> Reviewed:
    """Lock as approve does (version FOR SHARE, owner, head); both definitions' owner decides."""
    restored = pair.restored
    version = await definition_rows.lock_pinned_version(
        conn, ctx.host_id, restored.wf_def_id, restored.workflow_version
    )
    assert version is not None  # revisions reference their version, and versions stay
    owner = await current_owner(conn, ctx.host_id, restored.wf_def_id)
    require_owner(ctx, owner)
    if pair.active.wf_def_id != restored.wf_def_id:
        require_owner(ctx, await current_owner(conn, ctx.host_id, pair.active.wf_def_id))
    head = await binding_rows.lock_head(conn, ctx.host_id, restored.tool_id)
    if head.active_binding_id != pair.active.binding_id:
        # Another operation moved the head since it was read: the caller's digest is stale.
        active = None
        if head.active_binding_id is not None:
            active = await binding_rows.select_revision(conn, ctx.host_id, head.active_binding_id)
        if active is None:
            raise _conflict("the Tool has no active revision to roll back")
        if active.binding_digest != expected:
            raise _stale_digest(active)
        raise _conflict("the Tool's active revision changed during the rollback; try again")
    return Reviewed(restored, version, owner, head)


def _new_revision(
    ctx: InvocationContext, reviewed: Reviewed, binding_id: str, operation_id: str
) -> binding_rows.NewRevision:
    restored = reviewed.revision
    return binding_rows.NewRevision(
        host_id=ctx.host_id,
        binding_id=binding_id,
        binding=restored.binding,
        write_tasks=restored.write_tasks,
        binding_digest=restored.binding_digest,
        approval_digest=restored.approval_digest,
        active=True,
        owner=reviewed.owner,
        requested_by=ctx.user_id,
        approved_by=ctx.user_id,
        approval_basis_id=restored.binding_id,
        carry_over_denied_reason=None,
        decided_by=ctx.user_id,
        operation_id=operation_id,
    )


async def _rollback(
    conn: Connection,
    ctx: InvocationContext,
    request: WorkflowBindingRollbackInput,
    policy: DestinationPolicy,
    parallelism_ceiling: int | None,
) -> WorkflowBindingRollbackOutput:
    comment = comment_of(request.comment, required=True)
    assert comment is not None  # required
    expected, operation_id = request.expected_binding_digest, request.operation_id
    pair = await _read_pair(conn, ctx, request.tool_id, expected)
    reviewed = await _lock(conn, ctx, pair, expected)
    # The restored revision must still pass every publish rule as configured now.
    await revalidate(conn, ctx, reviewed, policy, parallelism_ceiling)
    restored, head = reviewed.revision, reviewed.head
    plan = plan_of(request.repin_binding_ids, policy, parallelism_ceiling, comment, operation_id)
    repinned = await approve_plan(
        conn, ctx, plan, tool_id=restored.tool_id, version=restored.workflow_version
    )
    # After the plan: the Tools it repinned no longer pin the version being replaced.
    await refuse_stranding(
        conn,
        ctx.host_id,
        restored.tool_id,
        current_version=pair.active.workflow_version,
        next_version=restored.workflow_version,
        doing="rolling back",
    )
    await close_with_decision(
        conn,
        ctx,
        pair.active.binding_id,
        status="superseded",
        action="supersede",
        operation_id=operation_id,
        comment=comment,
    )
    binding_id = str(uuid.uuid4())
    await binding_rows.insert_revision(conn, _new_revision(ctx, reviewed, binding_id, operation_id))
    reach = await binding_rows.read_reach(conn, ctx.host_id, restored.binding_id)
    await binding_rows.insert_reach(conn, ctx.host_id, binding_id, reach)
    await binding_rows.insert_evidence(
        conn, ctx.host_id, binding_id, restored.write_tasks, reviewed.owner.user_id
    )
    decision_id = await binding_rows.insert_decision(
        conn,
        host_id=ctx.host_id,
        tool_id=restored.tool_id,
        binding_id=binding_id,
        action="rollback",
        actor=ctx.user_id,
        approval_digest=restored.approval_digest,
        comment=comment,
        operation_id=operation_id,
    )
    version = await binding_rows.advance_head(
        conn,
        ctx.host_id,
        restored.tool_id,
        active_binding_id=binding_id,
        pending_binding_id=head.pending_binding_id,
    )
    return WorkflowBindingRollbackOutput(
        result="rolledBack",
        status="active",
        tool_id=restored.tool_id,
        binding_id=binding_id,
        restored_binding_id=restored.binding_id,
        superseded_binding_id=pair.active.binding_id,
        workflow_version=restored.workflow_version,
        definition_digest=restored.definition_digest,
        binding_digest=restored.binding_digest,
        decision_id=decision_id,
        aggregate_version=version,
        repinned_binding_ids=repinned or UNSET,
    )


async def rollback_binding(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowBindingRollbackInput,
    arguments: Mapping[str, Any],
    *,
    policy: DestinationPolicy | None = None,
    maximum_parallelism: int | None = None,
) -> WorkflowBindingRollbackOutput:
    """workflow_binding_rollback: the owner restores the previous approved revision (reason
    required), pinned by expectedBindingDigest of the active one; a refusal changes nothing."""
    comment_of(request.comment, required=True)
    destination_policy = policy or DestinationPolicy()

    async def perform(conn: Connection) -> WorkflowBindingRollbackOutput:
        return await _rollback(conn, ctx, request, destination_policy, maximum_parallelism)

    return await run_operation(
        db,
        ctx,
        request,
        tool_name="workflow_binding_rollback",
        arguments=arguments,
        perform=perform,
        output=WorkflowBindingRollbackOutput,
        is_final=is_final_rejection,
    )
