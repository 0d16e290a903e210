"""Binding operations on the shared receipt ledger, with request-validation evidence.

Like runtime.publication.operations.run_operation, but the rejections that are stored (and
replayed) are chosen per error, not per code: only rejections carrying request-validation
evidence and VERSION_CONFLICT are final; every other error rolls back the whole transaction,
ledger row included, so it stays "unknown" and a retry runs afresh.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from runtime.errors import WorkflowError, policy_denied
from runtime.publication.bindings.errors import has_request_evidence
from runtime.publication.operations import canonical_copy, error_from_structured, request_digest
from runtime.publication.store import ledger
from runtime.security import InvocationContext
from runtime.store import Connection, Database

Perform = Callable[[Connection], Awaitable[dict[str, Any]]]


def is_final_rejection(error: WorkflowError) -> bool:
    """Stored rejections: request-only evidence, and a stale expectedAggregateVersion."""
    return has_request_evidence(error) or error.code == "VERSION_CONFLICT"


def _check_replay(
    record: ledger.OperationRecord, ctx: InvocationContext, tool: str, digest: str
) -> dict[str, Any]:
    if record.requested_by != ctx.user_id:
        raise policy_denied("the operation belongs to another user")
    if record.tool_name != tool or record.request_digest != digest:
        raise WorkflowError(
            "WORKFLOW_IDEMPOTENCY_CONFLICT",
            "operationId was already used with a different request",
        )
    if record.response is None:  # pragma: no cover - responses commit with their claim
        raise WorkflowError("WORKFLOW_OPERATION_PENDING", "the operation is still in progress")
    return record.response


async def _perform_once(conn: Connection, perform: Perform) -> tuple[dict[str, Any], bool]:
    try:
        # A savepoint, so a stored rejection leaves no partial mutation behind.
        async with conn.transaction():
            return canonical_copy(await perform(conn)), False
    except WorkflowError as error:
        if not is_final_rejection(error):
            raise
        return canonical_copy(error.to_structured()), True


async def run_binding_operation(
    db: Database,
    ctx: InvocationContext,
    *,
    tool_name: str,
    operation_id: str,
    arguments: Mapping[str, Any],
    perform: Perform,
) -> dict[str, Any]:
    """Claim or lock (host, operationId) first, then replay or perform and store the response."""
    digest = request_digest(arguments)
    async with db.transaction() as conn:
        claimed = await ledger.claim_operation(
            conn,
            host_id=ctx.host_id,
            operation_id=operation_id,
            tool_name=tool_name,
            request_digest=digest,
            requested_by=ctx.user_id,
        )
        if claimed:
            response, is_error = await _perform_once(conn, perform)
            await ledger.complete_operation(
                conn,
                host_id=ctx.host_id,
                operation_id=operation_id,
                response=response,
                is_error=is_error,
            )
        else:
            record = await ledger.lock_operation(conn, ctx.host_id, operation_id)
            if record is None:  # pragma: no cover - the claim conflicted, so the row exists
                raise WorkflowError("WORKFLOW_OPERATION_PENDING", "the operation is in progress")
            response = canonical_copy(_check_replay(record, ctx, tool_name, digest))
            is_error = record.is_error
    if is_error:
        raise error_from_structured(response)
    return response
