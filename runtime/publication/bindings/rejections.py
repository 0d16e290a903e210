"""Rejections of binding operations, the request-validation evidence they may carry, and which
of them the receipt ledger stores.

The rejections that are stored (and replayed) are chosen per error, not per code: only
rejections carrying request-validation evidence and VERSION_CONFLICT are final; every other
error rolls back the whole transaction, ledger row included, so it stays "unknown" and a retry
runs afresh (seed 000 "Lost receipts").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec
from msgspec import field

from generated.errors import ErrorCodeName
from generated.models import ExpectedAggregateVersion, HostId, OperationId
from generated.tools import ToolName
from runtime.errors import WorkflowError

RequestSection = Literal["binding", "reach"]
_DISCRIMINATORS: dict[RequestSection, str] = {
    "binding": "bindingFields",
    "reach": "bindingReach",
}
# The publish request members each section covers (bindingReach: both typed arrays together).
_SECTION_MEMBERS: dict[str, RequestSection] = {
    "binding": "binding",
    "dependencies": "reach",
    "endpointTargets": "reach",
}


class PublishEnvelope(msgspec.Struct):
    """The publish members that identify and fence the operation, typed by the contract."""

    host_id: HostId = field(name="hostId")
    operation_id: OperationId = field(name="operationId")
    expected_aggregate_version: ExpectedAggregateVersion = field(name="expectedAggregateVersion")


def publish_envelope(arguments: Mapping[str, Any]) -> PublishEnvelope | None:
    """The envelope of publish arguments the catalog validator refused, None when it is invalid.

    Without a valid envelope the operation cannot be identified and fenced, so a refusal stays
    an unstored WORKFLOW_INPUT_INVALID without evidence (seed 000: deserialization errors).
    """
    try:
        return msgspec.convert(arguments, PublishEnvelope)
    except msgspec.ValidationError:
        return None


def failed_section(path: Sequence[str], rule: str | None) -> RequestSection | None:
    """The request section a catalog-validator failure lies in (path like data.binding.x).

    A failure at the member itself that is about its type proves nothing about the section:
    Portal needs "the named section present with its contract type" in the stored request.
    """
    if len(path) < 2 or path[0] != "data" or path[1] not in _SECTION_MEMBERS:
        return None
    if len(path) == 2 and rule == "type":
        return None
    return _SECTION_MEMBERS[path[1]]


class InvalidBindingRequest(ValueError):
    """A request-only rejection of one immutable request member (binding or reach).

    Raised by the pure rules; the service turns it into WORKFLOW_INPUT_INVALID carrying
    version 2 evidence and stores it under the operationId.
    """

    def __init__(
        self, section: RequestSection, message: str, problems: Sequence[Mapping[str, str]] = ()
    ) -> None:
        super().__init__(message)
        self.section: RequestSection = section
        self.message = message
        # Every problem of a catalog-validator refusal ({pointer, rule, message}), when listed.
        self.problems = [dict(problem) for problem in problems]


class BindingRuleViolation(ValueError):
    """A rejection that depends on stored state (definition, owner, policy, static fit).

    It carries no evidence: the Portal cannot prove it from the request alone.
    """

    def __init__(self, message: str, *, code: ErrorCodeName = "WORKFLOW_INPUT_INVALID") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def negative_version_error(operation_id: str, tool_name: ToolName) -> WorkflowError:
    """Version 1 evidence: a negative expectedAggregateVersion (publish or retire)."""
    evidence: dict[str, Any] = {
        "version": 1,
        "discriminator": "negativeExpectedAggregateVersion",
        "operationId": operation_id,
        "toolName": tool_name,
    }
    return WorkflowError(
        "WORKFLOW_INPUT_INVALID",
        "expectedAggregateVersion must not be negative",
        details={"requestValidation": evidence},
    )


def evidence_of(section: RequestSection, operation_id: str) -> dict[str, Any]:
    """Version 2 evidence: exactly its five documented members, nothing more."""
    return {
        "version": 2,
        "discriminator": _DISCRIMINATORS[section],
        "operationId": operation_id,
        "toolName": "workflow_binding_publish",
        "requestSection": section,
    }


def request_section_error(rejection: InvalidBindingRequest, operation_id: str) -> WorkflowError:
    """Version 2 evidence: bindingFields (section binding) or bindingReach (section reach)."""
    details: dict[str, Any] = {"requestValidation": evidence_of(rejection.section, operation_id)}
    if rejection.problems:
        details["problems"] = rejection.problems
    return WorkflowError("WORKFLOW_INPUT_INVALID", rejection.message, details=details)


def has_request_evidence(error: WorkflowError) -> bool:
    """True for a rejection that carries request-validation evidence (so it is stored)."""
    return isinstance(error.details, dict) and "requestValidation" in error.details


def is_final_rejection(error: WorkflowError) -> bool:
    """Stored rejections: request-only evidence, and a stale expectedAggregateVersion."""
    return has_request_evidence(error) or error.code == "VERSION_CONFLICT"


def not_found(what: str) -> WorkflowError:
    """A WORKFLOW_NOT_FOUND refusal."""
    return WorkflowError("WORKFLOW_NOT_FOUND", f"no {what} in the caller's host")


def version_conflict(current: int) -> WorkflowError:
    """VERSION_CONFLICT naming the head's current aggregate version."""
    return WorkflowError(
        "VERSION_CONFLICT",
        f"expectedAggregateVersion does not match the Tool head's aggregate version {current}",
        details={"aggregateVersion": current},
    )
