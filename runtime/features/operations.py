"""Operation identity of the feature tools (seed 004 F12): an operation id and a normalized
request digest; an identical retry gets the recorded outcome, a changed one a typed conflict."""

from __future__ import annotations

from typing import Any

import msgspec

from generated.errors import ErrorCodeName
from runtime.canonical import canonical_digest
from runtime.errors import WorkflowError
from runtime.features import store
from runtime.features.rules import Refusal
from runtime.store import Connection


def request_digest(tool: str, args: msgspec.Struct, user_id: str) -> str:
    """The digest of a request without its operation id (who asks is part of it)."""
    body = msgspec.to_builtins(args)
    body.pop("operationId", None)
    return canonical_digest({"tool": tool, "user": user_id, "request": body})


async def recorded(
    conn: Connection, host_id: str, operation_id: str, tool: str, digest: str
) -> dict[str, Any] | None:
    """The recorded outcome of this operation (marked a replay), or None when it is new."""
    row = await store.select_operation(conn, host_id, operation_id)
    if row is None:
        return None
    if row.tool != tool or row.request_digest != digest:
        raise WorkflowError(
            "WORKFLOW_IDEMPOTENCY_CONFLICT",
            "this operationId was used for a different request",
            details={"reason": "changed-request"},
        )
    return row.outcome | {"outcome": "replay"} if "outcome" in row.outcome else row.outcome


def refuse(refusal: Refusal, code: ErrorCodeName = "WORKFLOW_STATE_CONFLICT") -> WorkflowError:
    """A rule's refusal as the typed error the tools answer."""
    return WorkflowError(
        code, refusal.message, details={"reason": refusal.reason} | refusal.details
    )


def not_found() -> WorkflowError:
    """The error for a feature run or stage execution the host does not have."""
    return WorkflowError("WORKFLOW_NOT_FOUND", "no feature run or stage execution with this id")
