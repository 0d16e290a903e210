"""Definition publication: saved heads, immutable versions, grant sets, the receipt ledger.

Tool binding revisions (status rules, carry-over, evidence, decisions) are the ``bindings``
subpackage; the rows of both are in ``store``; ``pinned`` is all that execution reads.
"""

from __future__ import annotations

from runtime.publication.bindings import sample_binding_drift
from runtime.publication.bindings.destination_policy import (
    DestinationPolicy,
    check_destination,
    policy_from_settings,
)
from runtime.publication.bindings.rejections import BindingRuleViolation
from runtime.publication.definition_checks import validate_definition
from runtime.publication.definitions import (
    publish_definition,
    retire_definition,
    save_definition,
)
from runtime.publication.grants import grants_digest, sync_definition_grants
from runtime.publication.receipt_ledger import run_operation, sweep_operation_receipts
from runtime.publication.secrets import delete_secret, list_secrets, put_secret

__all__ = [
    "BindingRuleViolation",
    "DestinationPolicy",
    "check_destination",
    "delete_secret",
    "grants_digest",
    "list_secrets",
    "policy_from_settings",
    "publish_definition",
    "put_secret",
    "retire_definition",
    "run_operation",
    "sample_binding_drift",
    "save_definition",
    "sweep_operation_receipts",
    "sync_definition_grants",
    "validate_definition",
]
