"""Shared pieces of the binding services: request envelopes, owners, status names, times."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from runtime.canonical import SAFE_INTEGER_MAX
from runtime.errors import WorkflowError, input_invalid, policy_denied
from runtime.publication.bindings.carry_over import Owner
from runtime.publication.bindings.store import lock_definition_owner
from runtime.publication.requests import normalize_uuid
from runtime.security import InvocationContext, check_host_assertion
from runtime.store import Connection

COMMENT_MAX = 2000
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


def accept_arguments(ctx: InvocationContext, args: Any) -> Mapping[str, Any]:
    """Check the hostId assertion before anything else reads the arguments."""
    if not isinstance(args, Mapping):
        raise input_invalid("arguments must be an object")
    check_host_assertion(ctx, args.get("hostId"))
    return args


def uuid_argument(args: Mapping[str, Any], key: str) -> str:
    """A required UUID argument in canonical lower-case form."""
    value = normalize_uuid(args.get(key))
    if value is None:
        raise input_invalid(f"{key} must be a UUID")
    return value


def expected_version_argument(args: Mapping[str, Any]) -> int:
    """expectedAggregateVersion as an integer (negative values are judged later, stored)."""
    value = args.get("expectedAggregateVersion")
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > SAFE_INTEGER_MAX:
        raise input_invalid("expectedAggregateVersion must be an integer")
    return value


def comment_argument(args: Mapping[str, Any], *, required: bool) -> str | None:
    """An optional or required decision comment (1-2000 characters, no control characters)."""
    value = args.get("comment")
    if value is None:
        if required:
            raise input_invalid("comment is required")
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > COMMENT_MAX:
        raise input_invalid(f"comment must be non-empty text of at most {COMMENT_MAX} characters")
    if any((ord(c) < 32 and c not in "\t\n\r") or ord(c) == 127 for c in value):
        raise input_invalid("comment must not contain control characters")
    return value


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
