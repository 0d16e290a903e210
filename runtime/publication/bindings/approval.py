"""Approving a revision: the locks and checks an owner's approval takes, and the activation.

decide, rollback and the promotion plans approve through these, so every approval locks in one
order (pinned version FOR SHARE, owner, Tool head), revalidates the same rules and passes the
reverse dependency gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from msgspec import UNSET, UnsetType

from generated.models import WorkflowBindingDecideOutput
from runtime.errors import WorkflowError, input_invalid
from runtime.publication.bindings.binding_problems import revalidation_refusal
from runtime.publication.bindings.destination_policy import DestinationPolicy
from runtime.publication.bindings.rejections import not_found
from runtime.publication.bindings.status_rules import current_owner, require_owner
from runtime.publication.bindings.validation import check_pinned, check_revision
from runtime.publication.check_threads import off_loop
from runtime.publication.promotion.dependents import refuse_stranding
from runtime.publication.store import binding_rows, definition_rows
from runtime.publication.store.definition_rows import Owner
from runtime.security import InvocationContext
from runtime.store import Connection


def comment_of(value: str | UnsetType, *, required: bool) -> str | None:
    """A decision comment; a reject or revoke needs one with some text (not only spaces)."""
    comment = None if value is UNSET else value
    if comment is not None and not comment.strip():
        raise input_invalid("comment must contain text, not only spaces")
    if comment is None and required:
        raise input_invalid("comment is required")
    return comment


async def close_with_decision(
    conn: Connection,
    ctx: InvocationContext,
    binding_id: str,
    *,
    status: binding_rows.StoredStatus,
    action: binding_rows.DecisionAction,
    operation_id: str | None,
    comment: str | None = None,
) -> str | None:
    """Close an active or pending revision and append its decision; None when already closed."""
    revision = await binding_rows.select_revision(conn, ctx.host_id, binding_id)
    assert revision is not None
    if not await binding_rows.close_revision(
        conn, ctx.host_id, binding_id, status=status, decided_by=ctx.user_id
    ):
        return None
    return await binding_rows.insert_decision(
        conn,
        host_id=ctx.host_id,
        tool_id=revision.tool_id,
        binding_id=binding_id,
        action=action,
        actor=ctx.user_id,
        approval_digest=revision.approval_digest,
        comment=comment,
        operation_id=operation_id,
    )


async def active_version(
    conn: Connection, host_id: str, head: binding_rows.PublicationHead
) -> str | None:
    """The definition version the Tool's active revision pins, or None without one."""
    if head.active_binding_id is None:
        return None
    active = await binding_rows.select_revision(conn, host_id, head.active_binding_id)
    assert active is not None  # the head references its revisions
    return active.workflow_version


@dataclass(frozen=True, slots=True)
class Reviewed:
    """A revision the owner decides on, read under its locks."""

    revision: binding_rows.StoredRevision
    version: definition_rows.PinnedVersion
    owner: Owner
    head: binding_rows.PublicationHead


async def lock_reviewed_revision(
    conn: Connection, ctx: InvocationContext, binding_id: str, expected_digest: str
) -> Reviewed:
    """Lock version (FOR SHARE), owner and Tool head in order; check owner and reviewed digest."""
    found = await binding_rows.select_revision(conn, ctx.host_id, binding_id)
    if found is None:
        raise not_found("binding revision with that bindingId")
    version = await definition_rows.lock_pinned_version(
        conn, ctx.host_id, found.wf_def_id, found.workflow_version
    )
    assert version is not None  # revisions reference their version, and versions stay
    owner = await current_owner(conn, ctx.host_id, found.wf_def_id)
    require_owner(ctx, owner)
    head = await binding_rows.lock_head(conn, ctx.host_id, found.tool_id)
    revision = await binding_rows.select_revision(conn, ctx.host_id, binding_id)
    assert revision is not None
    if revision.binding_digest != expected_digest:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH",
            "expectedBindingDigest differs from the revision's bindingDigest",
            details={"bindingDigest": revision.binding_digest},
        )
    return Reviewed(revision, version, owner, head)


async def revalidate(
    conn: Connection,
    ctx: InvocationContext,
    reviewed: Reviewed,
    policy: DestinationPolicy,
    parallelism_ceiling: int | None,
) -> None:
    """Approve (and rollback) re-check the version, then every publish rule in one pass.

    The binding's fields, the effect matrix, coverage, static fit, the service's parallelism
    ceiling and the destination policy as configured now: one refusal lists every problem.
    """
    if reviewed.version.status != "active":
        raise WorkflowError(
            "WORKFLOW_DEFINITION_RETIRED", "the pinned definition version is retired"
        )
    revision = reviewed.revision
    reach = await binding_rows.read_reach(conn, ctx.host_id, revision.binding_id)
    checked = check_revision(revision.binding, reach)
    pinned = await off_loop(  # parsing and checking the pinned definition is CPU-bound
        check_pinned,
        reviewed.version.document,
        checked,
        policy,
        parallelism_ceiling=parallelism_ceiling,
    )
    problems = [*checked.problems, *pinned.problems]
    if problems:
        raise revalidation_refusal(problems)


def decision_receipt(
    result: Literal["approved", "rejected"],
    status: Literal["active", "rejected"],
    revision: binding_rows.StoredRevision,
    decision_id: str,
    version: int,
) -> WorkflowBindingDecideOutput:
    """The workflow_binding_decide receipt of a decided revision."""
    return WorkflowBindingDecideOutput(
        result=result,
        status=status,
        tool_id=revision.tool_id,
        binding_id=revision.binding_id,
        binding_digest=revision.binding_digest,
        approval_digest=revision.approval_digest,
        decision_id=decision_id,
        aggregate_version=version,
    )


async def approve_reviewed(
    conn: Connection,
    ctx: InvocationContext,
    reviewed: Reviewed,
    comment: str | None,
    operation_id: str,
) -> WorkflowBindingDecideOutput:
    """Activate a pending revision the owner reviewed (the caller revalidated it)."""
    revision, owner, head = reviewed.revision, reviewed.owner, reviewed.head
    if head.active_binding_id is not None:
        await refuse_stranding(
            conn,
            ctx.host_id,
            revision.tool_id,
            current_version=await active_version(conn, ctx.host_id, head),
            next_version=revision.workflow_version,
            doing="approving this revision",
        )
        await close_with_decision(
            conn,
            ctx,
            head.active_binding_id,
            status="superseded",
            action="supersede",
            operation_id=operation_id,
        )
    activated = await binding_rows.activate_revision(
        conn, ctx.host_id, revision.binding_id, approved_by=ctx.user_id, owner=owner
    )
    assert activated  # pending under the head lock
    await binding_rows.insert_evidence(
        conn, ctx.host_id, revision.binding_id, revision.write_tasks, owner.user_id
    )
    decision_id = await binding_rows.insert_decision(
        conn,
        host_id=ctx.host_id,
        tool_id=revision.tool_id,
        binding_id=revision.binding_id,
        action="approve",
        actor=ctx.user_id,
        approval_digest=revision.approval_digest,
        comment=comment,
        operation_id=operation_id,
    )
    version = await binding_rows.advance_head(
        conn,
        ctx.host_id,
        revision.tool_id,
        active_binding_id=revision.binding_id,
        pending_binding_id=None,
    )
    return decision_receipt("approved", "active", revision, decision_id, version)
