"""workflow_binding_get and workflow_binding_list: one committed snapshot per call."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec
from msgspec import UNSET

from generated.models import (
    WorkflowBindingGetInput,
    WorkflowBindingGetOutput,
    WorkflowBindingListInput,
    WorkflowBindingListOutput,
)
from runtime.errors import input_invalid
from runtime.publication.bindings.rejections import not_found
from runtime.publication.ids import normalize_uuid
from runtime.publication.store import binding_rows
from runtime.security import InvocationContext, check_host_assertion
from runtime.store import Connection, Database

# The database keeps 'approved' (with active); the contract calls that status "active".
STATUS_NAMES = {"approved": "active"}
CONTRACT_STATUSES = {
    "active": "approved",
    "pendingApproval": "pendingApproval",
    "rejected": "rejected",
    "revoked": "revoked",
    "retired": "retired",
    "superseded": "superseded",
    "withdrawn": "withdrawn",
}


def contract_status(revision_status: str) -> str:
    """The RevisionStatus name of a stored revision_status."""
    return STATUS_NAMES.get(revision_status, revision_status)


def timestamp(value: datetime) -> str:
    """RFC 3339 UTC with a Z suffix and microseconds (the contract's Timestamp)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


DECISIONS_LIMIT = 200
LIST_DEFAULT_LIMIT = 25  # contracts: workflow_binding_list limit default 25


def _optional(doc: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        doc[key] = timestamp(value) if isinstance(value, datetime) else value


async def revision_document(
    conn: Connection, host_id: str, row: Mapping[str, Any]
) -> dict[str, Any]:
    """A stored revision as the contract's BindingRevision."""
    owner: dict[str, Any] = {"userId": row["owner_user_id"]}
    _optional(owner, "positionId", row["owner_position_id"])
    reach = await binding_rows.read_reach(conn, host_id, row["binding_id"])
    doc: dict[str, Any] = {
        "bindingId": row["binding_id"],
        "status": contract_status(row["revision_status"]),
        "binding": row["binding"],
        "bindingDigest": row["binding_digest"],
        "approvalDigest": row["approval_digest"],
        "owner": owner,
        "requestedBy": row["requested_by"],
        "requestedAt": timestamp(row["requested_ts"]),
        "reach": reach.document(),
        "writeTasks": row["write_tasks"],
    }
    _optional(doc, "approvedBy", row["approved_by"])
    _optional(doc, "approvedAt", row["approved_ts"])
    _optional(doc, "approvalBasisId", row["approval_basis_id"])
    _optional(doc, "carryOverDeniedReason", row["carry_over_denied_reason"])
    return doc


def _decision_document(row: Mapping[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "decisionId": row["decision_id"],
        "bindingId": row["binding_id"],
        "action": row["action"],
        "actor": row["actor"],
        "approvalDigest": row["approval_digest"],
        "decidedAt": timestamp(row["decided_ts"]),
    }
    _optional(doc, "comment", row["comment"])
    _optional(doc, "operationId", row["operation_id"])
    return doc


async def get_binding(
    db: Database,
    ctx: InvocationContext,
    request: WorkflowBindingGetInput,
    *,
    may_retire: bool = False,
) -> WorkflowBindingGetOutput:
    """workflow_binding_get: a revision (by id, else pending, else active, else the newest), the
    Tool's head pointers, its active revision for comparison, and the decision history.

    may_retire: the caller holds a role that may retire any Tool of the host, so it may read the
    head it needs for retirement (the aggregate version) without owning or requesting the Tool.
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
        row = (
            None
            if wanted is None
            else await binding_rows.select_revision(conn, ctx.host_id, wanted)
        )
        if row is None or row["tool_id"] != tool_id:
            raise not_found("binding revision of that Tool")
        result: dict[str, Any] = {"toolId": tool_id, "aggregateVersion": head.aggregate_version}
        _optional(result, "activeBindingId", head.active_binding_id)
        _optional(result, "pendingBindingId", head.pending_binding_id)
        result["revision"] = await revision_document(conn, ctx.host_id, row)
        if head.active_binding_id is not None and head.active_binding_id != row["binding_id"]:
            active = await binding_rows.select_revision(conn, ctx.host_id, head.active_binding_id)
            assert active is not None
            result["activeRevision"] = await revision_document(conn, ctx.host_id, active)
        decisions = await binding_rows.select_decisions(conn, ctx.host_id, tool_id, DECISIONS_LIMIT)
        result["decisions"] = [_decision_document(decision) for decision in decisions]
    return msgspec.convert(result, WorkflowBindingGetOutput)


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


def _list_params(ctx: InvocationContext, request: WorkflowBindingListInput) -> dict[str, Any]:
    limit = LIST_DEFAULT_LIMIT if request.limit is UNSET else request.limit
    after_ts, after_id = (None, None)
    if request.cursor is not UNSET:
        after_ts, after_id = decode_cursor(request.cursor)
    return {
        "host_id": ctx.host_id,
        "role": request.role,
        "user_id": ctx.user_id,
        "positions": sorted(ctx.positions),
        "wf_def_id": None if request.wf_def_id is UNSET else request.wf_def_id,
        "tool_id": None if request.tool_id is UNSET else request.tool_id,
        "status": None if request.status is UNSET else CONTRACT_STATUSES[request.status],
        "after_ts": after_ts,
        "after_id": after_id,
        "limit": limit + 1,
    }


def _list_item(row: Mapping[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "bindingId": row["binding_id"],
        "toolId": row["tool_id"],
        "toolName": row["tool_name"],
        "wfDefId": row["wf_def_id"],
        "workflowVersion": row["workflow_version"],
        "status": contract_status(row["revision_status"]),
        "definitionDigest": row["definition_digest"],
        "bindingDigest": row["binding_digest"],
        "requestedBy": row["requested_by"],
        "requestedAt": timestamp(row["requested_ts"]),
    }
    _optional(item, "decidedBy", row["decided_by"])
    _optional(item, "decidedAt", row["decided_ts"])
    return item


async def list_bindings(
    db: Database, ctx: InvocationContext, request: WorkflowBindingListInput
) -> WorkflowBindingListOutput:
    """workflow_binding_list: revisions the caller owns (by stored definition owner) or requested,
    newest request first, with pending counts per definition, from one snapshot."""
    check_host_assertion(ctx, request.host_id)
    params = _list_params(ctx, request)
    page_size = params["limit"] - 1
    async with db.transaction(read_only=True, isolation="repeatable read") as conn:
        rows = await binding_rows.list_revisions(conn, params)
        counts = await binding_rows.count_pending(conn, params)
    result: dict[str, Any] = {
        "items": [_list_item(row) for row in rows[:page_size]],
        "pendingCount": sum(int(row["pending_count"]) for row in counts),
        "pendingCounts": [
            {"wfDefId": row["wf_def_id"], "pendingCount": int(row["pending_count"])}
            for row in counts
        ],
    }
    if len(rows) > page_size:
        last = rows[page_size - 1]
        result["nextCursor"] = encode_cursor(last["requested_ts"], last["binding_id"])
    return msgspec.convert(result, WorkflowBindingListOutput)
