"""Rows of the operation receipt ledger."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from runtime.publication.store import QUERIES, fetch_one, json_param
from runtime.store import Connection


class OperationRecord(msgspec.Struct, frozen=True):
    """A stored operation: who asked, what was asked and the complete response.

    The response is any publication tool's receipt or a rejection's structured body, kept as
    the JSON object it was stored as: the ledger decodes it into the caller's output type.
    """

    tool_name: str
    request_digest: str
    requested_by: str
    response: dict[str, Any] | None
    is_error: bool


async def claim_operation(
    conn: Connection,
    *,
    host_id: str,
    operation_id: str,
    tool_name: str,
    request_digest: str,
    requested_by: str,
) -> bool:
    """Insert the operation row; False when (host, operationId) already exists."""
    params = {
        "host_id": host_id,
        "operation_id": operation_id,
        "tool_name": tool_name,
        "request_digest": request_digest,
        "requested_by": requested_by,
    }
    cursor = await conn.execute(QUERIES["claim_operation"], params)
    return await cursor.fetchone() is not None


async def lock_operation(
    conn: Connection, host_id: str, operation_id: str
) -> OperationRecord | None:
    """Lock and read an operation row of host (FOR UPDATE)."""
    params = {"host_id": host_id, "operation_id": operation_id}
    return await fetch_one(conn, QUERIES["lock_operation"], params, OperationRecord)


async def complete_operation(
    conn: Connection,
    *,
    host_id: str,
    operation_id: str,
    response: dict[str, Any],
    is_error: bool,
) -> None:
    """Store the complete response of a claimed operation."""
    params = {
        "host_id": host_id,
        "operation_id": operation_id,
        "response": json_param(response),
        "is_error": is_error,
    }
    cursor = await conn.execute(QUERIES["complete_operation"], params)
    if cursor.rowcount != 1:
        raise RuntimeError("operation record was not claimed by this transaction")


async def sweep_operations(conn: Connection, *, cutoff: datetime, batch_size: int) -> int:
    """Delete one batch of records created before cutoff; the number deleted."""
    cursor = await conn.execute(
        QUERIES["sweep_operations"], {"cutoff": cutoff, "batch_size": batch_size}
    )
    return cursor.rowcount
