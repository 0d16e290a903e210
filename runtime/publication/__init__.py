"""Definition publication: saved heads, immutable versions, grant sets, the operation ledger.

Tool binding revisions (status rules, carry-over, evidence, decisions) are the ``bindings``
subpackage; the rows of both are in ``store``; ``pinned`` is all that execution reads.
"""

from __future__ import annotations

from runtime.publication.definition_checks import validate_definition
from runtime.publication.definitions import (
    PUBLISH_TOOL,
    RETIRE_TOOL,
    SAVE_TOOL,
    publish_definition,
    read_definition_head,
    read_definition_version,
    retire_definition,
    save_definition,
)
from runtime.publication.grants import (
    GRANTS_SYNC_TOOL,
    grants_digest,
    read_definition_grants,
    sync_definition_grants,
)
from runtime.publication.receipt_ledger import (
    RECEIPT_RETENTION,
    run_operation,
    sweep_operation_receipts,
)

__all__ = [
    "GRANTS_SYNC_TOOL",
    "PUBLISH_TOOL",
    "RECEIPT_RETENTION",
    "RETIRE_TOOL",
    "SAVE_TOOL",
    "grants_digest",
    "publish_definition",
    "read_definition_grants",
    "read_definition_head",
    "read_definition_version",
    "retire_definition",
    "run_operation",
    "save_definition",
    "sweep_operation_receipts",
    "sync_definition_grants",
    "validate_definition",
]
