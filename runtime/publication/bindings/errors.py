"""Rejections of binding publication and the request-validation evidence they may carry."""

from __future__ import annotations

from typing import Any, Literal

from runtime.errors import WorkflowError

PUBLISH_TOOL = "workflow_binding_publish"
RETIRE_TOOL = "workflow_binding_retire"
DECIDE_TOOL = "workflow_binding_decide"
REVOKE_TOOL = "workflow_binding_revoke"

RequestSection = Literal["binding", "reach"]
_DISCRIMINATORS: dict[RequestSection, str] = {
    "binding": "bindingFields",
    "reach": "bindingReach",
}


class InvalidBindingRequest(ValueError):
    """A request-only rejection of one immutable request member (binding or reach).

    Raised by the pure rules; the service turns it into WORKFLOW_INPUT_INVALID carrying
    version 2 evidence and stores it under the operationId.
    """

    def __init__(self, section: RequestSection, message: str) -> None:
        super().__init__(message)
        self.section: RequestSection = section
        self.message = message


class BindingRuleViolation(ValueError):
    """A rejection that depends on stored state (definition, owner, policy, static fit).

    It carries no evidence: the Portal cannot prove it from the request alone.
    """

    def __init__(self, message: str, *, code: str = "WORKFLOW_INPUT_INVALID") -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def to_error(self) -> WorkflowError:
        """The WorkflowError sent to the caller (never stored as a final rejection)."""
        return WorkflowError(self.code, self.message)


def negative_version_error(operation_id: str, tool_name: str) -> WorkflowError:
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


def request_section_error(rejection: InvalidBindingRequest, operation_id: str) -> WorkflowError:
    """Version 2 evidence: bindingFields (section binding) or bindingReach (section reach)."""
    evidence: dict[str, Any] = {
        "version": 2,
        "discriminator": _DISCRIMINATORS[rejection.section],
        "operationId": operation_id,
        "toolName": PUBLISH_TOOL,
        "requestSection": rejection.section,
    }
    return WorkflowError(
        "WORKFLOW_INPUT_INVALID", rejection.message, details={"requestValidation": evidence}
    )


def has_request_evidence(error: WorkflowError) -> bool:
    """True for a rejection that carries request-validation evidence (so it is stored)."""
    return isinstance(error.details, dict) and "requestValidation" in error.details
