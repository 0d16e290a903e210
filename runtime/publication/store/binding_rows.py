"""Rows of Tool binding revisions, their publication heads, reach, evidence and decisions."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from runtime.binding_reach import Annotations, Dependency, EndpointTarget, Reach
from runtime.publication.store import QUERIES
from runtime.store import Connection


@dataclass(frozen=True, slots=True)
class PublicationHead:
    """A Tool's publication head: aggregate version and its active and pending revisions."""

    aggregate_version: int
    active_binding_id: str | None
    pending_binding_id: str | None


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def stored_annotations(document: dict[str, Any]) -> Annotations:
    """The effect flags of toolAnnotations Workflow stored after validating them."""
    return Annotations(
        read_only=bool(document["readOnly"]),
        destructive=bool(document["destructive"]),
        human_approval_required=bool(document.get("humanApprovalRequired", False)),
    )


async def _one(conn: Connection, query: str, params: dict[str, Any]) -> dict[str, Any] | None:
    cursor = await conn.execute(query, params)
    return await cursor.fetchone()


async def _all(conn: Connection, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = await conn.execute(query, params)
    return await cursor.fetchall()


async def lock_version_for_share(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> dict[str, Any] | None:
    """Lock a pinned definition version FOR SHARE and read it with its document."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    return await _one(conn, QUERIES["lock_version_for_share"], params)


async def lock_definition_owner(
    conn: Connection, host_id: str, wf_def_id: str
) -> dict[str, Any] | None:
    """The saved head's current owner (FOR SHARE), or None when no head was saved."""
    return await _one(
        conn, QUERIES["lock_definition_owner"], {"host_id": host_id, "wf_def_id": wf_def_id}
    )


async def lock_head(conn: Connection, host_id: str, tool_id: str) -> PublicationHead:
    """Insert the Tool head if missing (ON CONFLICT DO NOTHING), then lock it FOR UPDATE."""
    params = {"host_id": host_id, "tool_id": tool_id}
    await conn.execute(QUERIES["insert_publication_head"], params)
    row = await _one(conn, QUERIES["lock_publication_head"], params)
    assert row is not None  # inserted above or already present; heads are never deleted
    return PublicationHead(
        row["aggregate_version"], row["active_binding_id"], row["pending_binding_id"]
    )


async def read_head(conn: Connection, host_id: str, tool_id: str) -> PublicationHead | None:
    """A Tool's head without locking, or None."""
    row = await _one(
        conn, QUERIES["select_publication_head"], {"host_id": host_id, "tool_id": tool_id}
    )
    if row is None:
        return None
    return PublicationHead(
        row["aggregate_version"], row["active_binding_id"], row["pending_binding_id"]
    )


async def advance_head(
    conn: Connection,
    host_id: str,
    tool_id: str,
    *,
    active_binding_id: str | None,
    pending_binding_id: str | None,
) -> int:
    """Set the head's active and pending revisions; returns the new aggregate version."""
    row = await _one(
        conn,
        QUERIES["advance_publication_head"],
        {
            "host_id": host_id,
            "tool_id": tool_id,
            "active_binding_id": active_binding_id,
            "pending_binding_id": pending_binding_id,
        },
    )
    assert row is not None  # the caller holds the head lock
    version: int = row["aggregate_version"]
    return version


async def select_revision(conn: Connection, host_id: str, binding_id: str) -> dict[str, Any] | None:
    """One revision of the host, or None."""
    return await _one(
        conn, QUERIES["select_revision"], {"host_id": host_id, "binding_id": binding_id}
    )


async def insert_revision(conn: Connection, row: dict[str, Any]) -> None:
    """Insert a revision row (JSON members as Python values)."""
    params = dict(row)
    for key in (
        "idempotency_policy",
        "delegation_policy",
        "runtime_bounds",
        "admission_limits",
        "caller_policy",
        "tool_annotations",
        "input_schema",
        "output_schema",
        "binding",
        "write_tasks",
    ):
        params[key] = _json(params[key])
    await conn.execute(QUERIES["insert_revision"], params)


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
                "tool_annotations": _json(dep.annotations_document),
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
    deps = tuple(
        Dependency(
            nested_tool_id=row["nested_tool_id"],
            nested_tool_version=row["nested_tool_version"],
            contract_digest=row["contract_digest"],
            authorization_tool_name=row["authorization_tool_name"],
            dispatch_target=row["dispatch_target"],
            annotations=None
            if row["tool_annotations"] is None
            else stored_annotations(row["tool_annotations"]),
            annotations_document=row["tool_annotations"],
        )
        for row in await _all(conn, QUERIES["select_dependencies"], params)
    )
    targets = tuple(
        EndpointTarget(
            endpoint_ref=row["endpoint_ref"],
            endpoint_uri=row["endpoint_uri"],
            allowed_methods=tuple(row["allowed_methods"]),
            environments=tuple(row["environments"]),
            authorization_policy_digest=row["authorization_policy_digest"],
        )
        for row in await _all(conn, QUERIES["select_endpoint_targets"], params)
    )
    return Reach(dependencies=deps, endpoint_targets=targets)


async def insert_evidence(
    conn: Connection,
    host_id: str,
    binding_id: str,
    write_tasks: list[dict[str, Any]],
    approved_by: str,
) -> None:
    """One evidence row per write task of a revision that became active."""
    for task in write_tasks:
        await conn.execute(
            QUERIES["insert_evidence"],
            {
                "host_id": host_id,
                "binding_id": binding_id,
                "task_name": task["taskName"],
                "evidence_digest": task["approvalEvidenceDigest"],
                "task_kind": task["kind"],
                "task_target": task.get("method") or task.get("toolName"),
                "approved_by": approved_by,
            },
        )


async def select_evidence(conn: Connection, host_id: str, binding_id: str) -> list[dict[str, Any]]:
    """The task approval evidence of a revision."""
    return await _all(
        conn, QUERIES["select_evidence"], {"host_id": host_id, "binding_id": binding_id}
    )


async def activate_revision(
    conn: Connection,
    host_id: str,
    binding_id: str,
    *,
    approved_by: str,
    owner_user_id: str,
    owner_position_id: str | None,
) -> bool:
    """Move a pending revision to approved and active; False when it was not pending."""
    cursor = await conn.execute(
        QUERIES["activate_revision"],
        {
            "host_id": host_id,
            "binding_id": binding_id,
            "approved_by": approved_by,
            "owner_user_id": owner_user_id,
            "owner_position_id": owner_position_id,
        },
    )
    return cursor.rowcount == 1


async def close_revision(
    conn: Connection, host_id: str, binding_id: str, *, status: str, decided_by: str
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
    action: str,
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
    conn: Connection, host_id: str, tool_id: str, limit: int = 200
) -> list[dict[str, Any]]:
    """A Tool's decision history, newest first."""
    params = {"host_id": host_id, "tool_id": tool_id, "limit": limit}
    return await _all(conn, QUERIES["select_decisions"], params)


async def select_latest_revision_id(conn: Connection, host_id: str, tool_id: str) -> str | None:
    """The newest revision id of a Tool, or None."""
    row = await _one(
        conn, QUERIES["select_latest_revision"], {"host_id": host_id, "tool_id": tool_id}
    )
    return None if row is None else str(row["binding_id"])


async def tool_related_to_caller(
    conn: Connection, host_id: str, tool_id: str, user_id: str, positions: list[str]
) -> bool:
    """True when the caller owns the stored definition of, or requested, a revision of the Tool."""
    params = {"host_id": host_id, "tool_id": tool_id, "user_id": user_id, "positions": positions}
    row = await _one(conn, QUERIES["tool_related_to_caller"], params)
    return row is not None and bool(row["related"])


async def count_active_pinning(conn: Connection, host_id: str, wf_def_id: str, version: str) -> int:
    """Active revisions pinning a definition version."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    row = await _one(conn, QUERIES["count_active_pinning_version"], params)
    return 0 if row is None else int(row["active_count"])


async def select_pending_pinning(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> list[dict[str, Any]]:
    """Pending revisions pinning a definition version, in Tool order."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    return await _all(conn, QUERIES["select_pending_pinning_version"], params)


async def move_pending_to_owner(
    conn: Connection,
    host_id: str,
    wf_def_id: str,
    owner_user_id: str,
    owner_position_id: str | None,
) -> int:
    """Move a definition's pending revisions to a new owner; the number moved."""
    cursor = await conn.execute(
        QUERIES["move_pending_to_owner"],
        {
            "host_id": host_id,
            "wf_def_id": wf_def_id,
            "owner_user_id": owner_user_id,
            "owner_position_id": owner_position_id,
        },
    )
    return cursor.rowcount


async def list_revisions(conn: Connection, params: dict[str, Any]) -> list[dict[str, Any]]:
    """One page of listed revisions (see the list_revisions query for parameters)."""
    return await _all(conn, QUERIES["list_revisions"], params)


async def count_pending(conn: Connection, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Pending revisions per definition for the list filter."""
    return await _all(conn, QUERIES["count_pending_revisions"], params)
