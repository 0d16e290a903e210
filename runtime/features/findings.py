"""Finding identity (seed 004 [Finding Identity], F13-F16): pure, no I/O.

A canonical finding id is workflow-owned: a domain-separated, length-framed SHA-256 of the
feature run, the Workflow-allocated review id and the reviewer's local id, independent of the
wording. A reviewer cites an earlier finding by that id, or, inside one stage run (which cannot
hash), as ``<reviewId>#<localId>``.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from typing import Any

DOMAIN = b"workflow-mcp.devflow.finding.v1"
ACTIONABLE = frozenset({"blocking", "major"})


def _framed(*parts: bytes) -> bytes:
    return b"".join(struct.pack(">Q", len(part)) + part for part in parts)


def finding_id(feature_run_id: str, review_id: str, local_id: str) -> str:
    """The canonical id of a review's local finding (the same inputs, the same id)."""
    framed = _framed(DOMAIN, *(p.encode("utf-8") for p in (feature_run_id, review_id, local_id)))
    return "finding:" + hashlib.sha256(framed).hexdigest()


def review_ids(stage_execution_id: str, rounds: int) -> list[str]:
    """The review ids Workflow allocates before dispatch: the initial review and one per
    remediation round the budget still allows (F13: the model never chooses them)."""
    return [f"{stage_execution_id}:review-{n}" for n in range(rounds + 1)]


@dataclass
class Finding:
    """A canonical finding as the ledger holds it."""

    finding_id: str
    review_id: str
    local_id: str
    stage_execution_id: str
    severity: str
    status: str
    alias_of: str | None = None


@dataclass
class Allocation:
    """The finding ledger after one StageResult: every row (old and new) and what stays
    unresolved (citations that cannot close anything: F15)."""

    findings: dict[str, Finding]
    new_ids: list[dict[str, str]] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)


def _resolve(feature_run_id: str, cited: str, known: dict[str, Finding]) -> str | None:
    if "#" in cited:
        review_id, _, local_id = cited.partition("#")
        cited = finding_id(feature_run_id, review_id, local_id)
    return cited if cited in known else None


def allocate(
    feature_run_id: str,
    stage_execution_id: str,
    existing: list[Finding],
    reviews: list[dict[str, Any]],
) -> Allocation:
    """Apply the reviews in order: allocate new ids once, record validated duplicates as
    aliases, apply the reviewer's dispositions to findings of this feature only."""
    known = {f.finding_id: f for f in existing}
    result = Allocation(findings=known)
    for review in reviews:
        review_id = review["binding"]["reviewId"]
        for item in review["newFindings"]:
            _add_new(feature_run_id, stage_execution_id, review_id, item, result)
        for cited in review["existingFindings"]:
            target = _resolve(feature_run_id, cited["findingId"], known)
            if target is None:
                result.unresolved.append(cited["findingId"])
                continue
            finding = known[target]
            if finding.status != "duplicate":
                finding.status = "closed" if cited["disposition"] == "closed" else "open"
    return result


def _add_new(
    feature_run_id: str,
    stage_execution_id: str,
    review_id: str,
    item: dict[str, Any],
    result: Allocation,
) -> None:
    known = result.findings
    new_id = finding_id(feature_run_id, review_id, item["localId"])
    if new_id in known:
        return  # a replay of the same review: the same mapping, nothing new
    alias = None
    duplicate_of = item.get("duplicateOf")
    if duplicate_of:
        alias = _resolve(feature_run_id, duplicate_of, known)
        if alias is None:
            # An ambiguous or foreign duplicate claim closes nothing: the finding stays open.
            result.unresolved.append(duplicate_of)
    known[new_id] = Finding(
        finding_id=new_id,
        review_id=review_id,
        local_id=item["localId"],
        stage_execution_id=stage_execution_id,
        severity=item["severity"],
        status="duplicate" if alias else "open",
        alias_of=alias,
    )
    result.new_ids.append({"reviewId": review_id, "localId": item["localId"], "findingId": new_id})


def open_actionable(findings: dict[str, Finding], stage_execution_ids: set[str]) -> list[str]:
    """Actionable findings of these stage executions that are still open (F16)."""
    return sorted(
        f.finding_id
        for f in findings.values()
        if f.status == "open"
        and f.severity in ACTIONABLE
        and f.stage_execution_id in stage_execution_ids
    )
