"""workflow_binding_get and workflow_binding_list: one committed snapshot per call."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from msgspec import UNSET, UnsetType

from generated.models import (
    BindingDecision,
    BindingListItem,
    BindingRevision,
    Owner,
    PendingCount,
    RevisionStatus,
    WorkflowBindingGetInput,
    WorkflowBindingGetOutput,
    WorkflowBindingListInput,
    WorkflowBindingListOutput,
)
from runtime.canonical import timestamp
from runtime.errors import input_invalid
from runtime.publication.bindings.destination_policy import DestinationPolicy
from runtime.publication.bindings.rejections import not_found
from runtime.publication.ids import normalize_uuid
from runtime.publication.promotion.drift import tool_drift
from runtime.publication.store import binding_rows
from runtime.security import InvocationContext, check_host_assertion
from runtime.store import Connection, Database

# The database keeps 'approved' (with active); the contract calls that status "active".
CONTRACT_STATUS: dict[binding_rows.StoredStatus, RevisionStatus] = {
    "approved": "active",
    "pendingApproval": "pendingApproval",
    "rejected": "rejected",
    "revoked": "revoked",
    "retired": "retired",
    "superseded": "superseded",
    "withdrawn": "withdrawn",
}
STORED_STATUS = {contract: stored for stored, contract in CONTRACT_STATUS.items()}

DECISIONS_LIMIT = 200
LIST_DEFAULT_LIMIT = 25  # contracts: workflow_binding_list limit default 25


def _or_unset(value: str | None) -> str | UnsetType:
    return UNSET if value is None else value


def _time_or_unset(value: datetime | None) -> str | UnsetType:
    return UNSET if value is None else timestamp(value)


async def revision_document(
    conn: Connection, host_id: str, revision: binding_rows.StoredRevision
) -> BindingRevision:
    """A stored revision as the contract's BindingRevision, with its reach."""
    reach = await binding_rows.read_reach(conn, host_id, revision.binding_id)
    return BindingRevision(
        binding_id=revision.binding_id,
        status=CONTRACT_STATUS[revision.revision_status],
        binding=revision.binding,
        binding_digest=revision.binding_digest,
        approval_digest=revision.approval_digest,
        owner=Owner(
            user_id=revision.owner_user_id, position_id=_or_unset(revision.owner_position_id)
        ),
        requested_by=revision.requested_by,
        requested_at=timestamp(revision.requested_ts),
        reach=reach.contract(),
        write_tasks=revision.write_tasks,
        approved_by=_or_unset(revision.approved_by),
        approved_at=_time_or_unset(revision.approved_ts),
        approval_basis_id=_or_unset(revision.approval_basis_id),
        carry_over_denied_reason=_or_unset(revision.carry_over_denied_reason),
    )


def _decision(decision: binding_rows.StoredDecision) -> BindingDecision:
    return BindingDecision(
        decision_id=decision.decision_id,
        binding_id=decision.binding_id,
        action=decision.action,
        actor=decision.actor,
        approval_digest=decision.approval_digest,
        decided_at=timestamp(decision.decided_ts),
        comment=_or_unset(decision.comment),
        operation_id=_or_unset(decision.operation_id),
    )


async def get_binding(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowBindingGetInput,
    *,
    may_retire: bool = False,
    policy: DestinationPolicy | None = None,
) -> WorkflowBindingGetOutput:
    """workflow_binding_get: a revision (by id, else pending, else active, else the newest), the
    Tool's head pointers, its active revision for comparison, and the decision history.

    may_retire: the caller holds a role that may retire any Tool of the host, so it may read the
    head it needs for retirement (the aggregate version) without owning or requesting the Tool.
    drift: the active revision's dependency drift (policy: the destination policy as configured).
    """
    check_host_assertion(ctx, request.host_id)
    tool_id = request.tool_id
    binding_id = None if request.binding_id is UNSET else request.binding_id
    async with db.transaction(read_only=True, isolation="repeatable read") as conn:
        head = await binding_rows.read_head(conn, ctx.host_id, tool_id)
        # A caller with no relationship to the Tool learns nothing, not even that it exists.
        related = head is not None and (
            may_retire
            or await binding_rows.tool_related_to_caller(
                conn, ctx.host_id, tool_id, ctx.user_id, sorted(ctx.positions)
            )
        )
        if head is None or not related:
            raise not_found("binding publication for that toolId")
        wanted = binding_id or head.pending_binding_id or head.active_binding_id
        wanted = wanted or await binding_rows.select_latest_revision_id(conn, ctx.host_id, tool_id)
        revision = (
            None
            if wanted is None
            else await binding_rows.select_revision(conn, ctx.host_id, wanted)
        )
        if revision is None or revision.tool_id != tool_id:
            raise not_found("binding revision of that Tool")
        active: BindingRevision | UnsetType = UNSET
        if head.active_binding_id is not None and head.active_binding_id != revision.binding_id:
            stored = await binding_rows.select_revision(conn, ctx.host_id, head.active_binding_id)
            assert stored is not None
            active = await revision_document(conn, ctx.host_id, stored)
        decisions = await binding_rows.select_decisions(conn, ctx.host_id, tool_id, DECISIONS_LIMIT)
        drift = await tool_drift(conn, ctx.host_id, tool_id, policy)
        return WorkflowBindingGetOutput(
            tool_id=tool_id,
            aggregate_version=head.aggregate_version,
            revision=await revision_document(conn, ctx.host_id, revision),
            decisions=[_decision(decision) for decision in decisions],
            active_binding_id=_or_unset(head.active_binding_id),
            pending_binding_id=_or_unset(head.pending_binding_id),
            active_revision=active,
            drift=UNSET if drift is None else drift.contract(),
        )


def encode_cursor(requested_ts: datetime, binding_id: str) -> str:
    """An opaque page cursor: base64url of the last item's (requestedAt, bindingId)."""
    raw = json.dumps([requested_ts.isoformat(), binding_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: Any) -> tuple[datetime, str]:
    """The (requestedAt, bindingId) a cursor encodes; WORKFLOW_INPUT_INVALID when malformed."""
    try:
        if not isinstance(cursor, str) or len(cursor) > 512:
            raise ValueError(cursor)
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        when, binding_id = json.loads(raw)
        key = normalize_uuid(binding_id)
        if key is None:
            raise ValueError(binding_id)
        return datetime.fromisoformat(when), key
    except (ValueError, TypeError) as error:
        raise input_invalid("cursor is not a cursor from a previous page") from error


def _list_filter(
    ctx: InvocationContext, request: WorkflowBindingListInput
) -> binding_rows.RevisionFilter:
    limit = LIST_DEFAULT_LIMIT if request.limit is UNSET else request.limit
    after_ts, after_id = (None, None)
    if request.cursor is not UNSET:
        after_ts, after_id = decode_cursor(request.cursor)
    return binding_rows.RevisionFilter(
        host_id=ctx.host_id,
        role=request.role,
        user_id=ctx.user_id,
        positions=sorted(ctx.positions),
        wf_def_id=None if request.wf_def_id is UNSET else request.wf_def_id,
        tool_id=None if request.tool_id is UNSET else request.tool_id,
        status=None if request.status is UNSET else STORED_STATUS[request.status],
        after_ts=after_ts,
        after_id=after_id,
        limit=limit + 1,  # one more than the page: whether a next page exists
    )


def _list_item(revision: binding_rows.ListedRevision) -> BindingListItem:
    return BindingListItem(
        binding_id=revision.binding_id,
        tool_id=revision.tool_id,
        tool_name=revision.tool_name,
        wf_def_id=revision.wf_def_id,
        workflow_version=revision.workflow_version,
        status=CONTRACT_STATUS[revision.revision_status],
        definition_digest=revision.definition_digest,
        binding_digest=revision.binding_digest,
        requested_by=revision.requested_by,
        requested_at=timestamp(revision.requested_ts),
        decided_by=_or_unset(revision.decided_by),
        decided_at=_time_or_unset(revision.decided_ts),
    )


async def list_bindings(
    db: Database, ctx: InvocationContext, request: WorkflowBindingListInput
) -> WorkflowBindingListOutput:
    """workflow_binding_list: revisions the caller owns (by stored definition owner) or requested,
    newest request first, with pending counts per definition, from one snapshot."""
    check_host_assertion(ctx, request.host_id)
    where = _list_filter(ctx, request)
    page_size = where.limit - 1
    async with db.transaction(read_only=True, isolation="repeatable read") as conn:
        revisions = await binding_rows.list_revisions(conn, where)
        counts = await binding_rows.count_pending(conn, where)
    next_cursor: str | UnsetType = UNSET
    if len(revisions) > page_size:
        last = revisions[page_size - 1]
        next_cursor = encode_cursor(last.requested_ts, last.binding_id)
    return WorkflowBindingListOutput(
        items=[_list_item(revision) for revision in revisions[:page_size]],
        pending_count=sum(count.pending_count for count in counts),
        pending_counts=[
            PendingCount(wf_def_id=count.wf_def_id, pending_count=count.pending_count)
            for count in counts
        ],
        next_cursor=next_cursor,
    )
