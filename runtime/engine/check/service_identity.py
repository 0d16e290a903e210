"""Service-identity steps: calls that authenticate with a host secret instead of the user.

Seed 001, Authorization And Data Protection: "Workflow service identity is permitted only when
the step has explicit publication-time approval evidence because it can authorize an operation
the initiating user could not perform directly." A call whose authentication policy reads a
host secret (bearer, basic, apiKey) acts as the service that secret identifies, not as the
caller, so it needs `metadata.approvalEvidenceDigest` as a write task does; a call with
`bearer: {use: runCredential}` is the narrowed user delegation and needs none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from runtime.engine.model import HttpCallSpec, McpCallSpec, WorkflowDefinition, walk_tasks
from runtime.engine.parse.definition_errors import DefinitionError

EVIDENCE_KEY: Final = "approvalEvidenceDigest"
RULE: Final = "service-identity-evidence"
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class ServiceIdentityStep:
    """One call that authenticates with host secrets: where it is and what it reads."""

    qualified_name: str
    pointer: str
    policy: str
    secrets: tuple[str, ...]
    approval_evidence_digest: str | None


def service_identity_steps(definition: WorkflowDefinition) -> list[ServiceIdentityStep]:
    """Every http or mcp call whose authentication policy reads a host secret, in walk order."""
    found: list[ServiceIdentityStep] = []
    for task in walk_tasks(definition.tasks):
        spec = task.spec
        if not isinstance(spec, HttpCallSpec | McpCallSpec) or spec.credential is None:
            continue
        if not spec.credential.secrets:
            continue
        digest = task.metadata.get(EVIDENCE_KEY) if task.metadata else None
        found.append(
            ServiceIdentityStep(
                qualified_name=task.qualified_name,
                pointer=task.pointer,
                policy=spec.credential.name,
                secrets=spec.credential.secrets,
                approval_evidence_digest=digest if isinstance(digest, str) else None,
            )
        )
    return found


def service_identity_problems(definition: WorkflowDefinition) -> list[DefinitionError]:
    """A problem for every service-identity step without approval evidence."""
    return [
        DefinitionError(
            f"task {step.qualified_name} authenticates with host secret(s) "
            f"{', '.join(step.secrets)} (policy {step.policy}), acting as a service identity "
            "rather than as the caller, so it needs explicit approval evidence: add "
            f"metadata.{EVIDENCE_KEY}: sha256:<64 hex digits>, the digest of the review that "
            "approved this step",
            pointer=step.pointer,
            rule=RULE,
        )
        for step in service_identity_steps(definition)
        if step.approval_evidence_digest is None
        or _DIGEST.fullmatch(step.approval_evidence_digest) is None
    ]
