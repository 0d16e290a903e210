"""bindingDigest and approvalDigest, exactly as the specification's "Digests" section says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.canonical import canonical_digest
from runtime.publication.bindings.reach_rules import Reach

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


def binding_digest_form(binding: Mapping[str, Any], reach: Reach) -> dict[str, Any]:
    """The document bindingDigest hashes: binding fields, sorted dependencies and targets."""
    fields = {
        key: value for key, value in binding.items() if key not in EXCLUDED_FROM_BINDING_DIGEST
    }
    form: dict[str, Any] = without_nulls(
        {
            "binding": fields,
            "dependencies": [dep.document() for dep in reach.dependencies],
            "endpointTargets": [target.document() for target in reach.endpoint_targets],
        }
    )
    return form


def binding_digest(binding: Mapping[str, Any], reach: Reach) -> str:
    """Canonical SHA-256 identifying a revision (every field but sourceBindingId, plus reach)."""
    return canonical_digest(binding_digest_form(binding, reach))


def approval_digest_form(binding: Mapping[str, Any]) -> dict[str, Any]:
    """The document approvalDigest hashes: only the load and behaviour fields."""
    form: dict[str, Any] = without_nulls(
        {key: binding[key] for key in APPROVAL_FIELDS if key in binding}
    )
    return form


def approval_digest(binding: Mapping[str, Any]) -> str:
    """Canonical SHA-256 of what the owner approves; excludes reach, names and the version."""
    return canonical_digest(approval_digest_form(binding))
