"""Review coverage of the final reviews (seed 004 [Final Review], F18), as its smallest rule:
pure, no I/O. Acceptance applies it to a StageResult that carries `coverage`.

The full reviews come first (Codex, then Claude), each verdict bound to the exact candidate it
reviewed. Every later change is a transition from one candidate to the next: the chain from the
last full review to the current candidate must be unbroken, a local change with passing checks
is closed by the same reviewer resuming its session, and a broad or uncertain change (or a
substituted session) needs a fresh full review, so it is refused here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.features.rules import Refusal

FULL_ORDER = ("codex", "claude")


@dataclass(frozen=True)
class FullReview:
    """A full review's verdict, bound to the candidate digest it reviewed."""

    reviewer: str
    session: str
    candidate: str
    accepted: bool


@dataclass(frozen=True)
class Transition:
    """A change after the full reviews and the review that covered it."""

    before: str
    after: str
    impact: str  # local | broad | uncertain
    checks_passed: bool
    reviewer: str
    session: str
    accepted: bool


def _full_refusal(full: list[FullReview]) -> Refusal | None:
    if tuple(r.reviewer for r in full) != FULL_ORDER:
        return Refusal("coverage-order", "the full reviews are Codex's, then Claude's")
    if not all(r.accepted for r in full):
        return Refusal("coverage-verdict", "a full review did not accept its candidate")
    return None


def _transition_refusal(step: Transition, sessions: dict[str, str], at: str) -> Refusal | None:
    if step.before != at:
        return Refusal(
            "coverage-gap", f"no transition covers the change from {at} to {step.before}"
        )
    if step.impact != "local" or not step.checks_passed:
        return Refusal(
            "coverage-broad",
            f"the change to {step.after} is {step.impact} or its checks failed: it needs a "
            "fresh full review by the other reviewer",
        )
    if sessions.get(step.reviewer) != step.session:
        return Refusal(
            "coverage-session", f"{step.reviewer}'s session was substituted, not resumed"
        )
    if not step.accepted:
        return Refusal("coverage-verdict", f"the review of {step.after} did not accept it")
    return None


def coverage_refusal(
    full: list[FullReview], transitions: list[Transition], current: str
) -> Refusal | None:
    """Why the reviews do not cover the current candidate, or None when they do."""
    refusal = _full_refusal(full)
    if refusal is not None:
        return refusal
    sessions = {r.reviewer: r.session for r in full}
    at = full[-1].candidate
    if full[0].candidate != at and not transitions:
        return Refusal("coverage-gap", "no transition covers the change between the full reviews")
    for step in transitions:
        refusal = _transition_refusal(step, sessions, at)
        if refusal is not None:
            return refusal
        at = step.after
    if at != current:
        return Refusal("coverage-gap", f"the reviews end at {at}, not at the current candidate")
    return None


def result_coverage_refusal(coverage: dict[str, Any], current: str) -> Refusal | None:
    """The refusal of a StageResult's `coverage` (ReviewCoverage) for its artifact's digest."""
    full = [
        FullReview(r["reviewer"], r["sessionId"], r["candidate"], r["accepted"])
        for r in coverage["fullReviews"]
    ]
    steps = [
        Transition(
            before=t["before"],
            after=t["after"],
            impact=t["impact"],
            checks_passed=t["checksPassed"],
            reviewer=t["reviewer"],
            session=t["sessionId"],
            accepted=t["accepted"],
        )
        for t in coverage["transitions"]
    ]
    return coverage_refusal(full, steps, current)
