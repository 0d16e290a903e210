"""The operation receipt ledger: idempotent, host-scoped replay of mutating publication calls.

Every mutating call that carries an operationId runs through `run_operation`, which first
refuses a hostId argument naming another host than the verified one, then in ONE
transaction: claims (hostId, operationId) with INSERT ... ON CONFLICT DO NOTHING and locks the
row FOR UPDATE (an overlapping attempt waits for the first to commit or roll back), compares
the stored tool name and request digest, and either replays the stored response or performs
the mutation and stores its complete response beside it.

- The request digest is the `rfc8785-safe-json-v1` digest of the complete validated argument
  object as received, nothing removed (hostId and operationId included: both are already part
  of the key, so including them changes nothing, and "exact request" needs no exception list).
- A repeat with the same tool and digest returns the stored response; a different tool or
  digest under the same id is WORKFLOW_IDEMPOTENCY_CONFLICT. Records are keyed by the verified
  host, so another host never sees or replays them; another user of the same host is refused
  with WORKFLOW_POLICY_DENIED (only the requesting user may retry an operation).
- A rejection whose code is listed in `final_rejections` is stored and replayed like a receipt
  (a savepoint undoes the mutation's partial writes, the ledger row stays); any other error
  rolls the whole transaction back, ledger row included, so a retry runs afresh.
- Responses are stored in canonical (RFC 8785) member order and returned as the tool's generated
  output struct on both the first call and every replay, so a replay encodes to the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

import msgspec

from generated.tools import ToolName
from runtime.canonical import CanonicalError, canonical_bytes, canonical_digest
from runtime.errors import WorkflowError, input_invalid, policy_denied
from runtime.publication.store import receipt_rows
from runtime.security import InvocationContext, check_host_assertion
from runtime.store import Connection, Database

RECEIPT_RETENTION = timedelta(days=30)
OutputT = TypeVar("OutputT", bound=msgspec.Struct)
Perform = Callable[[Connection], Awaitable[OutputT]]
# Whether a rejection is final for its operation: stored, and replayed to every retry.
FinalRejection = Callable[[WorkflowError], bool]


class OperationRequest(Protocol):
    """A mutating publication request: the host it asserts and the operationId fencing it."""

    @property
    def host_id(self) -> str:
        """The hostId argument (an assertion, checked against the verified host)."""
        ...

    @property
    def operation_id(self) -> str:
        """The operationId argument (the ledger key within the verified host)."""
        ...


def canonical_copy(value: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a JSON object with members in RFC 8785 order at every depth."""
    copied: dict[str, Any] = json.loads(canonical_bytes(value))
    return copied


def error_from_structured(body: Mapping[str, Any]) -> WorkflowError:
    """Rebuild the WorkflowError whose to_structured() produced body."""
    error = body["error"]
    return WorkflowError(
        error["code"],
        error["message"],
        status=body["status"],
        retryable=error["retryable"],
        after_effect=error["afterEffect"],
        retry_after_ms=error.get("retryAfterMs"),
        details=error.get("details"),
        workflow_instance_id=body.get("workflowInstanceId"),
    )


def request_digest(arguments: Mapping[str, Any]) -> str:
    """The ledger's request digest: canonical digest of the complete argument object."""
    try:
        return canonical_digest(arguments)
    except CanonicalError as error:
        raise input_invalid(
            "arguments are outside the canonical JSON profile",
            details={"discriminator": error.discriminator},
        ) from error


def _replay(
    record: receipt_rows.OperationRecord, ctx: InvocationContext, tool: str, digest: str
) -> None:
    if record.requested_by != ctx.user_id:
        raise policy_denied("the operation belongs to another user")
    if record.tool_name != tool or record.request_digest != digest:
        raise WorkflowError(
            "WORKFLOW_IDEMPOTENCY_CONFLICT",
            "operationId was already used with a different request",
        )
    if record.response is None:  # pragma: no cover - responses commit with their claim
        raise WorkflowError("WORKFLOW_OPERATION_PENDING", "the operation is still in progress")


async def _perform_once(
    conn: Connection, perform: Perform[OutputT], is_final: FinalRejection
) -> tuple[dict[str, Any], bool]:
    try:
        # A savepoint, so a stored rejection leaves no partial mutation behind.
        async with conn.transaction():
            return canonical_copy(msgspec.to_builtins(await perform(conn))), False
    except WorkflowError as error:
        if not is_final(error):
            raise
        return canonical_copy(error.to_structured()), True


def rejections_with_codes(codes: frozenset[str]) -> FinalRejection:
    """A FinalRejection that stores the rejections with one of these codes."""
    return lambda error: error.code in codes


def _no_stored_rejections(error: WorkflowError) -> bool:
    return False


async def run_operation(
    db: Database,
    ctx: InvocationContext,
    request: OperationRequest,
    *,
    tool_name: ToolName,
    arguments: Mapping[str, Any],
    perform: Perform[OutputT],
    output: type[OutputT],
    is_final: FinalRejection = _no_stored_rejections,
) -> OutputT:
    """Check request's hostId, then run perform once per (host, operationId), replaying repeats.

    arguments is the exact argument object as received: the request digest is defined over it.

    A rejection for which is_final holds is stored and replayed like a receipt; any other
    error rolls the whole transaction back, ledger row included, so a retry runs afresh.
    """
    check_host_assertion(ctx, request.host_id)
    operation_id = request.operation_id
    digest = request_digest(arguments)
    async with db.transaction() as conn:
        claimed = await receipt_rows.claim_operation(
            conn,
            host_id=ctx.host_id,
            operation_id=operation_id,
            tool_name=tool_name,
            request_digest=digest,
            requested_by=ctx.user_id,
        )
        if claimed:
            response, is_error = await _perform_once(conn, perform, is_final)
            await receipt_rows.complete_operation(
                conn,
                host_id=ctx.host_id,
                operation_id=operation_id,
                response=response,
                is_error=is_error,
            )
        else:
            record = await receipt_rows.lock_operation(conn, ctx.host_id, operation_id)
            if record is None:  # pragma: no cover - the claim conflicted, so the row exists
                raise WorkflowError("WORKFLOW_OPERATION_PENDING", "the operation is in progress")
            _replay(record, ctx, tool_name, digest)
            assert record.response is not None
            response, is_error = canonical_copy(record.response), record.is_error
    if is_error:
        raise error_from_structured(response)
    return msgspec.convert(response, output)


async def sweep_operation_receipts(
    db: Database,
    *,
    now: datetime | None = None,
    retention: timedelta = RECEIPT_RETENTION,
    batch_size: int = 1000,
) -> int:
    """Delete operation records older than retention (30 days), in batches; the number deleted."""
    cutoff = (now or datetime.now(UTC)) - retention
    deleted = 0
    while True:
        async with db.transaction() as conn:
            count = await receipt_rows.sweep_operations(conn, cutoff=cutoff, batch_size=batch_size)
        deleted += count
        if count < batch_size:
            return deleted
