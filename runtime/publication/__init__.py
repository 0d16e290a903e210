"""Definition publication: saved heads, immutable versions, grant sets, the operation ledger.

Bindings (revisions, status rules, carry-over, evidence, decisions) join this package later as
their own modules beside these.
"""

from __future__ import annotations

from runtime.publication.bindings.destinations import (
    DestinationPolicy,
    check_destination,
    policy_from_settings,
)
from runtime.publication.bindings.errors import BindingRuleViolation
from runtime.publication.definitions import (
    publish_definition,
    read_definition_head,
    read_definition_version,
    retire_definition,
    save_definition,
    validate_definition,
)
from runtime.publication.grants import (
    grants_digest,
    read_definition_grants,
    sync_definition_grants,
)
from runtime.publication.operations import (
    RECEIPT_RETENTION,
    run_operation,
    sweep_operation_receipts,
)

__all__ = [
    "RECEIPT_RETENTION",
    "BindingRuleViolation",
    "DestinationPolicy",
    "check_destination",
    "grants_digest",
    "policy_from_settings",
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
