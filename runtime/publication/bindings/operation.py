"""Binding operations on the shared receipt ledger, with request-validation evidence.

The rejections that are stored (and replayed) are chosen per error, not per code: only
rejections carrying request-validation evidence and VERSION_CONFLICT are final; every other
error rolls back the whole transaction, ledger row included, so it stays "unknown" and a retry
runs afresh (seed 000 "Lost receipts").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.errors import WorkflowError
from runtime.publication.bindings.rejections import has_request_evidence
from runtime.publication.receipt_ledger import OutputT, Perform, run_operation
from runtime.security import InvocationContext
from runtime.store import Database


def is_final_rejection(error: WorkflowError) -> bool:
    """Stored rejections: request-only evidence, and a stale expectedAggregateVersion."""
    return has_request_evidence(error) or error.code == "VERSION_CONFLICT"


async def run_binding_operation(
    db: Database,
    ctx: InvocationContext,
    *,
    tool_name: str,
    operation_id: str,
    arguments: Mapping[str, Any],
    perform: Perform[OutputT],
    output: type[OutputT],
) -> OutputT:
    """Claim or lock (host, operationId) first, then replay or perform and store the response."""
    return await run_operation(
        db,
        ctx,
        tool_name=tool_name,
        operation_id=operation_id,
        arguments=arguments,
        perform=perform,
        output=output,
        is_final=is_final_rejection,
    )
