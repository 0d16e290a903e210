"""Rows of Tool binding revisions, their publication heads, reach, evidence and decisions."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from generated.models import ToolBinding, WriteTask
from runtime.binding_reach import Dependency, EndpointTarget, Reach
from runtime.publication.store import QUERIES, fetch_all, fetch_one, json_param
from runtime.publication.store.definition_rows import Owner
from runtime.store import Connection

# revision_status as the table's CHECK constraint allows it (the contract calls approved
# "active").
StoredStatus = Literal[
    "pendingApproval", "approved", "rejected", "revoked", "superseded", "retired", "withdrawn"
]
DecisionAction = Literal[
    "approve",
    "reject",
    "revoke",
    "retire",
    "supersede",
    "withdraw",
    "carryOver",
    "selfApprove",
    "rollback",
]


class PublicationHead(msgspec.Struct, frozen=True):
    """A Tool's publication head: aggregate version and its active and pending revisions."""

    aggregate_version: int
    active_binding_id: str | None
    pending_binding_id: str | None


class NewRevision(msgspec.Struct, frozen=True, kw_only=True):
    """A revision as publish writes it; its columns follow from the binding."""

    host_id: str
    binding_id: str
    binding: ToolBinding
    write_tasks: list[WriteTask]
    binding_digest: str
    approval_digest: str
    # Approved and active at once (selfApprove, carryOver), else pendingApproval.
    active: bool
    owner: Owner
    requested_by: str
    approved_by: str | None
    approval_basis_id: str | None
    carry_over_denied_reason: str | None
    decided_by: str | None
    operation_id: str


class StoredRevision(msgspec.Struct, frozen=True, kw_only=True):
    """A binding revision as stored: the binding and write tasks as the contract types them."""

    binding_id: str
    tool_id: str
    source_binding_id: str
    tool_name: str
    wf_def_id: str
    workflow_version: str
    definition_digest: str
    schema_digest: str
    binding: ToolBinding
    write_tasks: list[WriteTask]
    binding_digest: str
    approval_digest: str
    revision_status: StoredStatus
    active: bool
    owner_user_id: str
    owner_position_id: str | None
    requested_by: str
    requested_ts: datetime
    approved_by: str | None
    approved_ts: datetime | None
    approval_basis_id: str | None
    carry_over_denied_reason: str | None
    decided_by: str | None
    decided_ts: datetime | None

    @property
    def owner(self) -> Owner:
        """The owner who approves (or approved) the revision."""
        return Owner(self.owner_user_id, self.owner_position_id)


class StoredDecision(msgspec.Struct, frozen=True, kw_only=True):
    """One row of a Tool's decision history."""

    decision_id: str
    binding_id: str
    action: DecisionAction
    actor: str
    comment: str | None
    approval_digest: str
    decided_ts: datetime
    operation_id: str | None


class PendingPin(msgspec.Struct, frozen=True):
    """A pending revision that pins a definition version."""

    binding_id: str
    tool_id: str
    approval_digest: str


class RevisionFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Which revisions a list shows: the caller as owner or requester, filters, the page."""

    host_id: str
    role: Literal["owner", "requester"]
    user_id: str
    positions: list[str]
    wf_def_id: str | None
    tool_id: str | None
    status: StoredStatus | None
    # The last item of the previous page (requestedAt, bindingId), or None for the first page.
    after_ts: datetime | None
    after_id: str | None
    limit: int


class ListedRevision(msgspec.Struct, frozen=True, kw_only=True):
    """A revision as a list shows it."""

    binding_id: str
    tool_id: str
    tool_name: str
    wf_def_id: str
    workflow_version: str
    revision_status: StoredStatus
    definition_digest: str
    binding_digest: str
    requested_by: str
    requested_ts: datetime
    decided_by: str | None
    decided_ts: datetime | None


class PendingCount(msgspec.Struct, frozen=True):
    """How many pending revisions pin one definition."""

    wf_def_id: str
    pending_count: int


async def lock_head(conn: Connection, host_id: str, tool_id: str) -> PublicationHead:
    """Insert the Tool head if missing (ON CONFLICT DO NOTHING), then lock it FOR UPDATE."""
    params = {"host_id": host_id, "tool_id": tool_id}
    await conn.execute(QUERIES["insert_publication_head"], params)
    head = await fetch_one(conn, QUERIES["lock_publication_head"], params, PublicationHead)
    assert head is not None  # inserted above or already present; heads are never deleted
    return head


async def read_head(conn: Connection, host_id: str, tool_id: str) -> PublicationHead | None:
    """A Tool's head without locking, or None."""
    params = {"host_id": host_id, "tool_id": tool_id}
    return await fetch_one(conn, QUERIES["select_publication_head"], params, PublicationHead)


async def advance_head(
    conn: Connection,
    host_id: str,
    tool_id: str,
    *,
    active_binding_id: str | None,
    pending_binding_id: str | None,
) -> int:
    """Set the head's active and pending revisions; returns the new aggregate version."""
    params = {
        "host_id": host_id,
        "tool_id": tool_id,
        "active_binding_id": active_binding_id,
        "pending_binding_id": pending_binding_id,
    }
    row = await fetch_one(conn, QUERIES["advance_publication_head"], params, _AggregateVersion)
    assert row is not None  # the caller holds the head lock
    return row.aggregate_version


async def select_revision(conn: Connection, host_id: str, binding_id: str) -> StoredRevision | None:
    """One revision of the host, or None."""
    params = {"host_id": host_id, "binding_id": binding_id}
    return await fetch_one(conn, QUERIES["select_revision"], params, StoredRevision)


def _revision_params(revision: NewRevision) -> dict[str, Any]:
    binding = revision.binding
    return {
        "host_id": revision.host_id,
        "binding_id": revision.binding_id,
        "tool_id": binding.tool_id,
        "source_binding_id": binding.source_binding_id,
        "tool_name": binding.tool_name,
        "wf_def_id": binding.wf_def_id,
        "workflow_version": binding.workflow_version,
        "definition_digest": binding.definition_digest,
        "schema_digest": binding.schema_digest,
        "invocation_mode": binding.invocation_mode,
        "sync_wait_ms": binding.sync_wait_ms,
        "total_deadline_ms": binding.total_deadline_ms,
        "execution_class": binding.execution_class,
        "result_text_mode": binding.result_text_mode,
        "cancellation_policy": binding.cancellation_policy,
        "idempotency_policy": json_param(binding.idempotency_policy),
        "delegation_policy": json_param(binding.delegation_policy),
        "runtime_bounds": json_param(binding.runtime_bounds),
        "admission_limits": json_param(binding.admission_limits),
        "caller_policy": json_param(binding.caller_policy),
        "tool_annotations": json_param(binding.tool_annotations),
        "input_schema": None if binding.input_schema is UNSET else json_param(binding.input_schema),
        "output_schema": (
            None if binding.output_schema is UNSET else json_param(binding.output_schema)
        ),
        "binding": json_param(binding),
        "write_tasks": json_param(revision.write_tasks),
        "binding_digest": revision.binding_digest,
        "approval_digest": revision.approval_digest,
        "revision_status": "approved" if revision.active else "pendingApproval",
        "active": revision.active,
        "owner_user_id": revision.owner.user_id,
        "owner_position_id": revision.owner.position_id,
        "requested_by": revision.requested_by,
        "approved_by": revision.approved_by,
        "approval_basis_id": revision.approval_basis_id,
        "carry_over_denied_reason": revision.carry_over_denied_reason,
        "decided_by": revision.decided_by,
        "operation_id": revision.operation_id,
    }


async def insert_revision(conn: Connection, revision: NewRevision) -> None:
    """Insert a revision row: the binding whole, and each column the admission reads."""
    await conn.execute(QUERIES["insert_revision"], _revision_params(revision))


async def insert_reach(conn: Connection, host_id: str, binding_id: str, reach: Reach) -> None:
    """Write a revision's dependencies and endpoint targets (once)."""
    for dep in reach.dependencies:
        await conn.execute(
            QUERIES["insert_dependency"],
            {
                "host_id": host_id,
                "binding_id": binding_id,
                "authorization_tool_name": dep.authorization_tool_name,
                "nested_tool_id": dep.nested_tool_id,
                "nested_tool_version": dep.nested_tool_version,
                "contract_digest": dep.contract_digest,
                "dispatch_target": dep.dispatch_target,
                "tool_annotations": json_param(dep.tool_annotations),
            },
        )
    for target in reach.endpoint_targets:
        await conn.execute(
            QUERIES["insert_endpoint_target"],
            {
                "host_id": host_id,
                "binding_id": binding_id,
                "endpoint_ref": target.endpoint_ref,
                "endpoint_uri": target.endpoint_uri,
                "allowed_methods": list(target.allowed_methods),
                "environments": list(target.environments),
                "authorization_policy_digest": target.authorization_policy_digest,
            },
        )


async def read_reach(conn: Connection, host_id: str, binding_id: str) -> Reach:
    """A revision's stored reach, as typed values."""
    params = {"host_id": host_id, "binding_id": binding_id}
    dependencies = await fetch_all(conn, QUERIES["select_dependencies"], params, Dependency)
    targets = await fetch_all(conn, QUERIES["select_endpoint_targets"], params, EndpointTarget)
    return Reach(dependencies=tuple(dependencies), endpoint_targets=tuple(targets))


def _task_target(task: WriteTask) -> str:
    target = task.method if task.kind == "http" else task.tool_name
    assert target is not UNSET  # a stored write task names its method or its Tool
    return target


async def insert_evidence(
    conn: Connection,
    host_id: str,
    binding_id: str,
    write_tasks: Sequence[WriteTask],
    approved_by: str,
) -> None:
    """One evidence row per write task of a revision that became active."""
    for task in write_tasks:
        await conn.execute(
            QUERIES["insert_evidence"],
            {
                "host_id": host_id,
                "binding_id": binding_id,
                "task_name": task.task_name,
                "evidence_digest": task.approval_evidence_digest,
                "task_kind": task.kind,
                "task_target": _task_target(task),
                "approved_by": approved_by,
            },
        )


async def activate_revision(
    conn: Connection,
    host_id: str,
    binding_id: str,
    *,
    approved_by: str,
    owner: Owner,
) -> bool:
    """Move a pending revision to approved and active; False when it was not pending."""
    cursor = await conn.execute(
        QUERIES["activate_revision"],
        {
            "host_id": host_id,
            "binding_id": binding_id,
            "approved_by": approved_by,
            "owner_user_id": owner.user_id,
            "owner_position_id": owner.position_id,
        },
    )
    return cursor.rowcount == 1


async def close_revision(
    conn: Connection, host_id: str, binding_id: str, *, status: StoredStatus, decided_by: str
) -> bool:
    """Move an active or pending revision to a closed status; False when it was neither."""
    cursor = await conn.execute(
        QUERIES["close_revision"],
        {
            "host_id": host_id,
            "binding_id": binding_id,
            "revision_status": status,
            "decided_by": decided_by,
        },
    )
    return cursor.rowcount == 1


async def insert_decision(
    conn: Connection,
    *,
    host_id: str,
    tool_id: str,
    binding_id: str,
    action: DecisionAction,
    actor: str,
    approval_digest: str,
    comment: str | None = None,
    operation_id: str | None = None,
) -> str:
    """Append one decision; returns its id."""
    decision_id = str(uuid.uuid4())
    await conn.execute(
        QUERIES["insert_decision"],
        {
            "host_id": host_id,
            "decision_id": decision_id,
            "tool_id": tool_id,
            "binding_id": binding_id,
            "action": action,
            "actor": actor,
            "comment": comment,
            "approval_digest": approval_digest,
            "operation_id": operation_id,
        },
    )
    return decision_id


async def select_decisions(
    conn: Connection, host_id: str, tool_id: str, limit: int
) -> list[StoredDecision]:
    """A Tool's decision history, newest first."""
    params = {"host_id": host_id, "tool_id": tool_id, "limit": limit}
    return await fetch_all(conn, QUERIES["select_decisions"], params, StoredDecision)


async def select_latest_revision_id(conn: Connection, host_id: str, tool_id: str) -> str | None:
    """The newest revision id of a Tool, or None."""
    params = {"host_id": host_id, "tool_id": tool_id}
    row = await fetch_one(conn, QUERIES["select_latest_revision"], params, _BindingId)
    return None if row is None else row.binding_id


async def tool_related_to_caller(
    conn: Connection, host_id: str, tool_id: str, user_id: str, positions: list[str]
) -> bool:
    """True when the caller owns the stored definition of, or requested, a revision of the Tool."""
    params = {"host_id": host_id, "tool_id": tool_id, "user_id": user_id, "positions": positions}
    row = await fetch_one(conn, QUERIES["tool_related_to_caller"], params, _Related)
    return row is not None and bool(row.related)


async def count_active_pinning(conn: Connection, host_id: str, wf_def_id: str, version: str) -> int:
    """Active revisions pinning a definition version."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    row = await fetch_one(conn, QUERIES["count_active_pinning_version"], params, _ActiveCount)
    return 0 if row is None else row.active_count


async def select_pending_pinning(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> list[PendingPin]:
    """Pending revisions pinning a definition version, in Tool order."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    return await fetch_all(conn, QUERIES["select_pending_pinning_version"], params, PendingPin)


async def move_pending_to_owner(
    conn: Connection, host_id: str, wf_def_id: str, owner: Owner
) -> int:
    """Move a definition's pending revisions to a new owner; the number moved."""
    cursor = await conn.execute(
        QUERIES["move_pending_to_owner"],
        {
            "host_id": host_id,
            "wf_def_id": wf_def_id,
            "owner_user_id": owner.user_id,
            "owner_position_id": owner.position_id,
        },
    )
    return cursor.rowcount


async def list_revisions(conn: Connection, where: RevisionFilter) -> list[ListedRevision]:
    """One page of listed revisions (limit: the page size plus one, to tell a next page)."""
    params = msgspec.structs.asdict(where)
    return await fetch_all(conn, QUERIES["list_revisions"], params, ListedRevision)


async def count_pending(conn: Connection, where: RevisionFilter) -> list[PendingCount]:
    """Pending revisions per definition for the list filter (its status and page aside)."""
    params = msgspec.structs.asdict(where)
    return await fetch_all(conn, QUERIES["count_pending_revisions"], params, PendingCount)


class _AggregateVersion(msgspec.Struct, frozen=True):
    aggregate_version: int


class _BindingId(msgspec.Struct, frozen=True):
    binding_id: str


class _Related(msgspec.Struct, frozen=True):
    related: bool


class _ActiveCount(msgspec.Struct, frozen=True):
    active_count: int


class _Reaching(msgspec.Struct, frozen=True):
    nested_tool_id: str


async def dependencies_reaching(
    conn: Connection, host_id: str, nested_tool_ids: Sequence[str], target_tool_id: str
) -> set[str]:
    """The nested Tools whose current revisions' dependencies lead back to target_tool_id."""
    if not nested_tool_ids:
        return set()
    params = {"host_id": host_id, "start": list(nested_tool_ids), "target": target_tool_id}
    rows = await fetch_all(conn, QUERIES["select_dependencies_reaching"], params, _Reaching)
    return {row.nested_tool_id for row in rows}
