"""Which binding rejections the shared receipt ledger (run_operation) stores and replays.

The rejections that are stored (and replayed) are chosen per error, not per code: only
rejections carrying request-validation evidence and VERSION_CONFLICT are final; every other
error rolls back the whole transaction, ledger row included, so it stays "unknown" and a retry
runs afresh (seed 000 "Lost receipts").
"""

from __future__ import annotations

from runtime.errors import WorkflowError
from runtime.publication.bindings.errors import has_request_evidence


def is_final_rejection(error: WorkflowError) -> bool:
    """Stored rejections: request-only evidence, and a stale expectedAggregateVersion."""
    return has_request_evidence(error) or error.code == "VERSION_CONFLICT"
