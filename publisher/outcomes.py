"""What one run did for each Tool, and how an answer proves (or does not prove) an outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from publisher.client import Answer
from publisher.ledger import Operation

Status = Literal["published", "pending-approval", "failed", "error", "unconfirmed"]

# Fix hints for the codes a publish meets most; the message itself says what was refused.
HINTS: dict[str, str] = {
    "WORKFLOW_POLICY_DENIED": "check the token's host and roles (admin, or workflow-admin and "
    "genai-admin) and, for an endpoint target, Workflow's publication.destinations",
    "WORKFLOW_INPUT_INVALID": "fix the Tool spec field the message names and rerun",
    "WORKFLOW_DEFINITION_MISMATCH": "a published version is immutable: bump document.version "
    "in the definition and pin the new version",
    "WORKFLOW_DEFINITION_RETIRED": "pin an active version of the definition",
    "WORKFLOW_IDEMPOTENCY_CONFLICT": "Workflow holds this revision with other content; rerun "
    "with --adopt-revisions if this directory is the source of truth",
    "VERSION_CONFLICT": "another publisher changed the Tool meanwhile; rerun to publish over "
    "the current head",
    "TRANSPORT": "Workflow did not answer; rerun: the same operation is retried",
}


@dataclass
class ToolOutcome:
    """One row of the result table."""

    tool: str
    status: Status
    detail: str = ""
    code: str = ""
    message: str = ""
    owner: str = ""

    @property
    def hint(self) -> str:
        """How to fix an error (empty when published)."""
        if self.status in ("published", "pending-approval"):
            return ""
        hint = HINTS.get(self.code, "")
        if self.status == "error":
            hint = (hint + "; " if hint else "") + "the outcome is unproven: rerun retries it"
        return hint


def _evidence_matches(evidence: Any, operation: Operation) -> bool:
    if not isinstance(evidence, dict) or evidence.get("operationId") != operation.operation_id:
        return False
    if evidence.get("toolName") != operation.tool_name:
        return False
    version = evidence.get("version")
    if version == 1:
        expected = operation.request.get("expectedAggregateVersion")
        return set(evidence) == {"version", "discriminator", "operationId", "toolName"} and (
            evidence.get("discriminator") == "negativeExpectedAggregateVersion"
            and isinstance(expected, int)
            and expected < 0
        )
    if version == 2:
        sections = {"bindingFields": "binding", "bindingReach": "reach"}
        section = sections.get(str(evidence.get("discriminator")))
        members = {"version", "discriminator", "operationId", "toolName", "requestSection"}
        return (
            set(evidence) == members
            and section is not None
            and evidence.get("requestSection") == section
            and section in ("binding", "reach")
        )
    return False


def proven_rejection(answer: Answer, operation: Operation) -> bool:
    """True only for a binding Tool error that proves this exact operation was refused.

    Seed 000 "Lost receipts": a validated VERSION_CONFLICT, or WORKFLOW_INPUT_INVALID with
    afterEffect false and request-validation evidence naming this operation and tool. A bare
    code proves nothing; every other answer leaves the operation unconfirmed.
    """
    if answer.kind != "tool-error" or operation.kind != "binding":
        return False
    error = answer.error or {}
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    assert isinstance(details, dict)
    if answer.code == "VERSION_CONFLICT":
        return isinstance(details.get("aggregateVersion"), int)
    if answer.code == "WORKFLOW_INPUT_INVALID" and error.get("afterEffect") is False:
        return _evidence_matches(details.get("requestValidation"), operation)
    return False
