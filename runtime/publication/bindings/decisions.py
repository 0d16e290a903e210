"""Owner decisions on binding revisions (decide, revoke) and Tool retirement."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runtime.errors import WorkflowError, input_invalid
from runtime.publication.bindings import store
from runtime.publication.bindings.common import (
    accept_arguments,
    comment_argument,
    current_owner,
    expected_version_argument,
    not_found,
    require_owner,
    uuid_argument,
)
from runtime.publication.bindings.destinations import DestinationPolicy, check_destinations
from runtime.publication.bindings.effects import check_pinned_version
from runtime.publication.bindings.errors import (
    DECIDE_TOOL,
    RETIRE_TOOL,
    REVOKE_TOOL,
    BindingRuleViolation,
    InvalidBindingRequest,
    negative_version_error,
)
from runtime.publication.bindings.fields import validate_binding
from runtime.publication.bindings.operation import run_binding_operation
from runtime.publication.bindings.publish import close_with_decision, version_conflict
from runtime.security import InvocationContext
from runtime.store import Connection, Database

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _expected_digest(args: Mapping[str, Any]) -> str:
    value = args.get("expectedBindingDigest")
    if not isinstance(value, str) or not _DIGEST.match(value):
        raise input_invalid("expectedBindingDigest must match sha256:<64 lower-case hex digits>")
    return value


async def _lock_reviewed_revision(
    conn: Connection, ctx: InvocationContext, binding_id: str, expected_digest: str
) -> tuple[dict[str, Any], dict[str, Any], store.PublicationHead]:
    """Lock version (FOR SHARE), owner and Tool head in order; check owner and reviewed digest."""
    found = await store.select_revision(conn, ctx.host_id, binding_id)
    if found is None:
        raise not_found("binding revision with that bindingId")
    version_row = await store.lock_version_for_share(
        conn, ctx.host_id, found["wf_def_id"], found["workflow_version"]
    )
    assert version_row is not None  # revisions reference their version, and versions stay
    owner = await current_owner(conn, ctx.host_id, found["wf_def_id"])
    require_owner(ctx, owner)
    head = await store.lock_head(conn, ctx.host_id, found["tool_id"])
    revision = await store.select_revision(conn, ctx.host_id, binding_id)
    assert revision is not None
    if revision["binding_digest"] != expected_digest:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH",
            "expectedBindingDigest differs from the revision's bindingDigest",
            details={"bindingDigest": revision["binding_digest"]},
        )
    return revision, {**version_row, "owner": owner}, head


async def _revalidate(
    conn: Connection,
    ctx: InvocationContext,
    revision: Mapping[str, Any],
    version_row: Mapping[str, Any],
    policy: DestinationPolicy,
) -> None:
    """Approve re-checks the version, effect matrix, static fit and destinations."""
    if version_row["status"] != "active":
        raise WorkflowError(
            "WORKFLOW_DEFINITION_RETIRED", "the pinned definition version is retired"
        )
    try:
        binding = validate_binding(revision["binding"])
        reach = await store.read_reach(conn, ctx.host_id, revision["binding_id"])
        check_pinned_version(version_row["document"], binding, reach)
        check_destinations(reach.endpoint_targets, policy)
    except InvalidBindingRequest as rejection:
        raise input_invalid(
            f"the revision no longer passes validation: {rejection.message}"
        ) from None
    except BindingRuleViolation as violation:
        raise violation.to_error() from None


def _decision_receipt(
    result: str, status: str, revision: Mapping[str, Any], decision_id: str, version: int
) -> dict[str, Any]:
    return {
        "result": result,
        "status": status,
        "toolId": revision["tool_id"],
        "bindingId": revision["binding_id"],
        "bindingDigest": revision["binding_digest"],
        "approvalDigest": revision["approval_digest"],
        "decisionId": decision_id,
        "aggregateVersion": version,
    }


async def _approve(
    conn: Connection,
    ctx: InvocationContext,
    revision: Mapping[str, Any],
    version_row: Mapping[str, Any],
    head: store.PublicationHead,
    comment: str | None,
    operation_id: str,
) -> dict[str, Any]:
    if head.active_binding_id is not None:
        await close_with_decision(
            conn,
            ctx,
            head.active_binding_id,
            status="superseded",
            action="supersede",
            operation_id=operation_id,
        )
    owner = version_row["owner"]
    activated = await store.activate_revision(
        conn,
        ctx.host_id,
        revision["binding_id"],
        approved_by=ctx.user_id,
        owner_user_id=owner.user_id,
        owner_position_id=owner.position_id,
    )
    assert activated  # pending under the head lock
    await store.insert_evidence(
        conn, ctx.host_id, revision["binding_id"], revision["write_tasks"], owner.user_id
    )
    decision_id = await store.insert_decision(
        conn,
        host_id=ctx.host_id,
        tool_id=revision["tool_id"],
        binding_id=revision["binding_id"],
        action="approve",
        actor=ctx.user_id,
        approval_digest=revision["approval_digest"],
        comment=comment,
        operation_id=operation_id,
    )
    version = await store.advance_head(
        conn,
        ctx.host_id,
        revision["tool_id"],
        active_binding_id=revision["binding_id"],
        pending_binding_id=None,
    )
    return _decision_receipt("approved", "active", revision, decision_id, version)


async def _decide(
    conn: Connection,
    ctx: InvocationContext,
    args: Mapping[str, Any],
    operation_id: str,
    policy: DestinationPolicy,
) -> dict[str, Any]:
    binding_id = uuid_argument(args, "bindingId")
    decision = args.get("decision")
    comment = comment_argument(args, required=decision == "reject")
    revision, version_row, head = await _lock_reviewed_revision(
        conn, ctx, binding_id, _expected_digest(args)
    )
    if revision["revision_status"] != "pendingApproval":
        raise WorkflowError("WORKFLOW_STATE_CONFLICT", "the revision is no longer pending approval")
    if decision == "approve":
        await _revalidate(conn, ctx, revision, version_row, policy)
        return await _approve(conn, ctx, revision, version_row, head, comment, operation_id)
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
    version = await store.advance_head(
        conn,
        ctx.host_id,
        revision["tool_id"],
        active_binding_id=head.active_binding_id,
        pending_binding_id=None,
    )
    return _decision_receipt("rejected", "rejected", revision, decision_id, version)


async def decide_binding(
    db: Database,
    ctx: InvocationContext,
    request: Mapping[str, Any],
    *,
    policy: DestinationPolicy | None = None,
) -> dict[str, Any]:
    """workflow_binding_decide: the stored definition owner approves or rejects a pending revision.

    approve revalidates inside the transaction and supersedes the previous active revision;
    reject requires a comment. expectedBindingDigest pins the revision the owner reviewed.
    """
    args = accept_arguments(ctx, request)
    operation_id = uuid_argument(args, "operationId")
    if args.get("decision") not in ("approve", "reject"):
        raise input_invalid("decision must be approve or reject")
    comment_argument(args, required=args.get("decision") == "reject")
    destination_policy = policy or DestinationPolicy()

    async def perform(conn: Connection) -> dict[str, Any]:
        return await _decide(conn, ctx, args, operation_id, destination_policy)

    return await run_binding_operation(
        db, ctx, tool_name=DECIDE_TOOL, operation_id=operation_id, arguments=args, perform=perform
    )


async def _revoke(
    conn: Connection, ctx: InvocationContext, args: Mapping[str, Any], operation_id: str
) -> dict[str, Any]:
    binding_id = uuid_argument(args, "bindingId")
    comment = comment_argument(args, required=True)
    revision, _, head = await _lock_reviewed_revision(conn, ctx, binding_id, _expected_digest(args))
    if revision["revision_status"] != "approved":
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
    version = await store.advance_head(
        conn,
        ctx.host_id,
        revision["tool_id"],
        active_binding_id=None,
        pending_binding_id=head.pending_binding_id,
    )
    return {
        "result": "revoked",
        "status": "revoked",
        "toolId": revision["tool_id"],
        "bindingId": binding_id,
        "bindingDigest": revision["binding_digest"],
        "decisionId": decision_id,
        "aggregateVersion": version,
    }


async def revoke_binding(
    db: Database, ctx: InvocationContext, request: Mapping[str, Any]
) -> dict[str, Any]:
    """workflow_binding_revoke: the stored owner revokes the active revision (reason required)."""
    args = accept_arguments(ctx, request)
    operation_id = uuid_argument(args, "operationId")
    comment_argument(args, required=True)

    async def perform(conn: Connection) -> dict[str, Any]:
        return await _revoke(conn, ctx, args, operation_id)

    return await run_binding_operation(
        db, ctx, tool_name=REVOKE_TOOL, operation_id=operation_id, arguments=args, perform=perform
    )


async def _retire(
    conn: Connection,
    ctx: InvocationContext,
    tool_id: str,
    expected: int,
    comment: str | None,
    operation_id: str,
) -> dict[str, Any]:
    if expected < 0:
        raise negative_version_error(operation_id, RETIRE_TOOL)
    head = await store.lock_head(conn, ctx.host_id, tool_id)
    if expected != head.aggregate_version:
        raise version_conflict(head.aggregate_version)
    receipt: dict[str, Any] = {"result": "unchanged", "toolId": tool_id}
    if head.active_binding_id is None and head.pending_binding_id is None:
        return {**receipt, "aggregateVersion": head.aggregate_version}
    for binding_id, status, action, member in (
        (head.active_binding_id, "retired", "retire", "retiredBindingId"),
        (head.pending_binding_id, "withdrawn", "withdraw", "withdrawnBindingId"),
    ):
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
            receipt[member] = binding_id
    version = await store.advance_head(
        conn, ctx.host_id, tool_id, active_binding_id=None, pending_binding_id=None
    )
    return {**receipt, "result": "retired", "aggregateVersion": version}


async def retire_binding(
    db: Database, ctx: InvocationContext, request: Mapping[str, Any]
) -> dict[str, Any]:
    """workflow_binding_retire: the active revision becomes retired, a pending one withdrawn."""
    args = accept_arguments(ctx, request)
    operation_id = uuid_argument(args, "operationId")
    tool_id = uuid_argument(args, "toolId")
    expected = expected_version_argument(args)
    comment = comment_argument(args, required=False)

    async def perform(conn: Connection) -> dict[str, Any]:
        return await _retire(conn, ctx, tool_id, expected, comment, operation_id)

    return await run_binding_operation(
        db, ctx, tool_name=RETIRE_TOOL, operation_id=operation_id, arguments=args, perform=perform
    )
