"""bindingDigest and approvalDigest, exactly as the specification's "Digests" section says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from generated.models import ToolBinding
from runtime.binding_reach import Reach
from runtime.canonical import canonical_digest

# Binding fields that are not part of the revision's identity.
EXCLUDED_FROM_BINDING_DIGEST = frozenset(
    {"sourceBindingId", "operationId", "expectedAggregateVersion"}
)
# The fields that change load or behaviour: what the owner approves.
APPROVAL_FIELDS = (
    "invocationMode",
    "syncWaitMs",
    "totalDeadlineMs",
    "executionClass",
    "cancellationPolicy",
    "idempotencyPolicy",
    "delegationPolicy",
    "runtimeBounds",
    "admissionLimits",
    "callerPolicy",
    "toolAnnotations",
)


def without_nulls(value: Any) -> Any:
    """A copy with null object members removed at every depth (null means absent)."""
    if isinstance(value, Mapping):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [without_nulls(item) for item in value]
    return value


def binding_digest_form(binding: ToolBinding, reach: Reach) -> dict[str, Any]:
    """The document bindingDigest hashes: binding fields, sorted dependencies and targets."""
    document: dict[str, Any] = msgspec.to_builtins(binding)
    reached: dict[str, Any] = msgspec.to_builtins(reach.contract())
    fields = {
        key: value for key, value in document.items() if key not in EXCLUDED_FROM_BINDING_DIGEST
    }
    form: dict[str, Any] = without_nulls(
        {
            "binding": fields,
            "dependencies": reached["dependencies"],
            "endpointTargets": reached["endpointTargets"],
        }
    )
    return form


def binding_digest(binding: ToolBinding, reach: Reach) -> str:
    """Canonical SHA-256 identifying a revision (every field but sourceBindingId, plus reach)."""
    return canonical_digest(binding_digest_form(binding, reach))


def approval_digest_form(binding: ToolBinding) -> dict[str, Any]:
    """The document approvalDigest hashes: only the load and behaviour fields."""
    document: dict[str, Any] = msgspec.to_builtins(binding)
    form: dict[str, Any] = without_nulls(
        {key: document[key] for key in APPROVAL_FIELDS if key in document}
    )
    return form


def approval_digest(binding: ToolBinding) -> str:
    """Canonical SHA-256 of what the owner approves; excludes reach, names and the version."""
    return canonical_digest(approval_digest_form(binding))
