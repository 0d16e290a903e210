"""Review evidence a user supplies for a write task, recorded in the converted definition.

A converter may not decide that a write was reviewed; `workflow-mcp convert --evidence
TASK=DIGEST` lets the user record the digest of their own review, so the converted file can be
published as a write Tool without editing it by hand. The digest lands where publication reads
it: the task's `metadata.approvalEvidenceDigest`.
"""

from __future__ import annotations

import re
from typing import Any

from runtime.engine.convert.tasks import Change

EVIDENCE_KEY = "approvalEvidenceDigest"
# The form publication accepts (runtime.publication.bindings.field_rules.DIGEST_PATTERN).
EVIDENCE_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class EvidenceError(ValueError):
    """An --evidence value that cannot be recorded (its message says why)."""


def parse_evidence(value: str) -> tuple[str, str]:
    """TASK=sha256:<64 hex> as (task, digest); the task is a name or a JSON pointer."""
    task, separator, digest = value.partition("=")
    if not separator or not task:
        raise EvidenceError(f"--evidence {value!r}: expected TASK=sha256:<64 hex digits>")
    if not EVIDENCE_DIGEST.match(digest):
        raise EvidenceError(
            f"--evidence for {task}: {digest!r} is not sha256:<64 lower-case hex digits> "
            "(for example the sha256sum of your review record)"
        )
    return task, digest


def record_evidence(document: dict[str, Any], pointer: str, digest: str) -> Change | None:
    """Set metadata.approvalEvidenceDigest on the task at pointer; None when already so."""
    task = _task_at(document, pointer)
    metadata = task.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    if metadata.get(EVIDENCE_KEY) == digest:
        return None
    before = metadata.get(EVIDENCE_KEY)
    task["metadata"] = {**metadata, EVIDENCE_KEY: digest}
    return Change(f"{pointer}/metadata/{EVIDENCE_KEY}", before, digest)


def _task_at(document: dict[str, Any], pointer: str) -> dict[str, Any]:
    # The pointer comes from the definition's own analysis, so every step exists.
    node: Any = document
    for token in pointer.split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        node = node[int(key)] if isinstance(node, list) else node[key]
    if not isinstance(node, dict):
        raise EvidenceError(f"{pointer} is not a task")
    return node
