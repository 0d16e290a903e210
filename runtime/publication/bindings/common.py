"""Shared pieces of the binding services: request envelopes, owners, status names, times."""

from __future__ import annotations

from datetime import UTC, datetime

from msgspec import UNSET, UnsetType

from runtime.errors import WorkflowError, input_invalid, policy_denied
from runtime.publication.bindings.status_rules import Owner
from runtime.publication.store.binding_rows import lock_definition_owner
from runtime.security import InvocationContext
from runtime.store import Connection

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


def comment_of(value: str | UnsetType, *, required: bool) -> str | None:
    """A decision comment; a reject or revoke needs one with some text (not only spaces)."""
    comment = None if value is UNSET else value
    if comment is not None and not comment.strip():
        raise input_invalid("comment must contain text, not only spaces")
    if comment is None and required:
        raise input_invalid("comment is required")
    return comment


def is_owner(ctx: InvocationContext, owner: Owner) -> bool:
    """The caller is the owner by user id, or holds the owner position in the verified token."""
    if ctx.user_id == owner.user_id:
        return True
    return owner.position_id is not None and owner.position_id in ctx.positions


def require_owner(ctx: InvocationContext, owner: Owner) -> None:
    """Refuse anyone but Workflow's stored definition owner."""
    if not is_owner(ctx, owner):
        raise policy_denied("only the workflow definition owner may do this")


NO_SAVED_HEAD = "the definition has no saved head; save it first"


async def current_owner(conn: Connection, host_id: str, wf_def_id: str) -> Owner:
    """The owner Workflow stored with the saved head; refused when no head was saved.

    A published version's owner comes from the publisher's own payload, so it never decides
    who may approve: only save changes ownership (seed 000 "Ownership").
    """
    head = await lock_definition_owner(conn, host_id, wf_def_id)
    if head is None:
        raise WorkflowError("WORKFLOW_STATE_CONFLICT", NO_SAVED_HEAD)
    return Owner(head["owner_user_id"], head["owner_position_id"])


def not_found(what: str) -> WorkflowError:
    """A WORKFLOW_NOT_FOUND refusal."""
    return WorkflowError("WORKFLOW_NOT_FOUND", f"no {what} in the caller's host")
