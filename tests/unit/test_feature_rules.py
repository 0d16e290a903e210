"""The pure rules of the development-feature ledger (issue 36, seed 004): finding identity and
dispositions (F13-F16), the remediation budget (F17), sign-off staleness (F19), intake (F20)
and the stage handoff order (F2, F8), with no database."""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import pytest

from runtime.features.budgets import charge, rounds_left
from runtime.features.coverage import FullReview, Transition, coverage_refusal
from runtime.features.findings import allocate, finding_id, open_actionable, review_ids
from runtime.features.rules import FeatureView, intake_refusal, start_refusal
from runtime.features.signoff import reopen_refusal, signoff_refusal
from runtime.features.wire import MalformedResult, parse_stage_result

FEATURE = "0198b000-0000-7000-8000-000000000001"
OTHER_FEATURE = "0198b000-0000-7000-8000-000000000002"
EXECUTION = "0198b000-0000-7000-8000-0000000000aa"
REQ = {"id": "artifact:requirements-v1", "digest": "sha256:" + "a" * 64}
DESIGN = {"id": "artifact:design", "digest": "sha256:" + "d" * 64}


def _finding(
    local: str, *, duplicate_of: str | None = None, severity: str = "blocking"
) -> dict[str, Any]:
    return {"localId": local, "severity": severity, "duplicateOf": duplicate_of}


def _review(
    review_id: str, new: list[dict[str, Any]], cited: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "binding": {"reviewId": review_id},
        "newFindings": new,
        "existingFindings": [{"findingId": f, "disposition": d} for f, d in cited or []],
    }


@pytest.mark.requirement("004:F13")
def test_review_ids_are_allocated_from_the_stage_execution_before_dispatch() -> None:
    assert review_ids(EXECUTION, 3) == [f"{EXECUTION}:review-{n}" for n in range(4)]
    assert review_ids(EXECUTION, 0) == [f"{EXECUTION}:review-0"]


@pytest.mark.requirement("004:F13")
def test_a_canonical_finding_id_is_a_domain_separated_length_framed_sha256() -> None:
    parts = [b"workflow-mcp.devflow.finding.v1", FEATURE.encode(), b"review-1", b"local-1"]
    framed = b"".join(struct.pack(">Q", len(p)) + p for p in parts)
    assert (
        finding_id(FEATURE, "review-1", "local-1")
        == "finding:" + hashlib.sha256(framed).hexdigest()
    )
    # Framing keeps ("ab", "c") and ("a", "bc") apart, and the feature is part of the identity.
    assert finding_id(FEATURE, "ab", "c") != finding_id(FEATURE, "a", "bc")
    assert finding_id(FEATURE, "r", "l") != finding_id(OTHER_FEATURE, "r", "l")


@pytest.mark.requirement("004:F14")
def test_a_replayed_review_keeps_its_mapping_and_a_reworded_citation_keeps_the_id() -> None:
    first = allocate(FEATURE, EXECUTION, [], [_review("r0", [_finding("l1")])])
    [mapping] = first.new_ids
    replay = allocate(
        FEATURE, EXECUTION, list(first.findings.values()), [_review("r0", [_finding("l1")])]
    )
    assert replay.new_ids == [] and set(replay.findings) == {mapping["findingId"]}
    # A later review cites the id (its wording is no part of the identity) and closes it.
    later = allocate(
        FEATURE,
        EXECUTION,
        list(first.findings.values()),
        [_review("r1", [], ((mapping["findingId"], "closed"),))],
    )
    assert later.findings[mapping["findingId"]].status == "closed"


@pytest.mark.requirement("004:F14")
def test_a_validated_duplicate_keeps_the_old_id_with_an_alias_record() -> None:
    first = allocate(FEATURE, EXECUTION, [], [_review("r0", [_finding("l1")])])
    old = first.new_ids[0]["findingId"]
    again = allocate(
        FEATURE,
        EXECUTION,
        list(first.findings.values()),
        [_review("r1", [_finding("l9", duplicate_of=old)])],
    )
    new = again.new_ids[0]["findingId"]
    assert again.findings[new].status == "duplicate" and again.findings[new].alias_of == old
    # A duplicate is not actionable on its own; the old finding stays what it was.
    assert open_actionable(again.findings, {EXECUTION}) == [old]


@pytest.mark.requirement("004:F15")
def test_an_ambiguous_duplicate_or_a_foreign_citation_closes_nothing() -> None:
    foreign = finding_id(OTHER_FEATURE, "r0", "l1")
    result = allocate(
        FEATURE,
        EXECUTION,
        [],
        [
            _review("r0", [_finding("l1", duplicate_of="finding:" + "0" * 64)]),
            _review("r1", [], [(foreign, "closed")]),
        ],
    )
    new = result.new_ids[0]["findingId"]
    assert result.findings[new].status == "open"
    assert result.unresolved == ["finding:" + "0" * 64, foreign]
    assert foreign not in result.findings


@pytest.mark.requirement("004:F16")
def test_a_still_open_actionable_finding_blocks_closure_and_minor_ones_do_not() -> None:
    result = allocate(
        FEATURE, EXECUTION, [], [_review("r0", [_finding("l1"), _finding("l2", severity="nit")])]
    )
    blocking = finding_id(FEATURE, "r0", "l1")
    assert open_actionable(result.findings, {EXECUTION}) == [blocking]
    closed = allocate(
        FEATURE,
        EXECUTION,
        list(result.findings.values()),
        [_review("r1", [], [("r0#l1", "closed")])],
    )
    assert open_actionable(closed.findings, {EXECUTION}) == []


@pytest.mark.requirement("004:F16")
def test_malformed_output_is_never_read_as_no_findings() -> None:
    for value in (None, "", {}, {"schemaVersion": 1, "reviews": []}, {"surprise": True}):
        with pytest.raises(MalformedResult):
            parse_stage_result(value)


@pytest.mark.requirement("004:F17")
def test_the_budget_counts_rounds_after_the_initial_review_and_survives_reopen() -> None:
    # The initial review and 3 remediation rounds fit the default budget exactly.
    spent = charge(
        reviews=4,
        remediation_turns=3,
        maximum_rounds=3,
        rounds_used=0,
        maximum_turns=40,
        turns_used=0,
    )
    assert (spent.rounds, spent.turns, spent.within) == (3, 7, True)
    # A reopened stage keeps what was consumed: nothing is left, one more round exceeds it.
    assert rounds_left(3, spent.rounds_used) == 0
    again = charge(
        reviews=2,
        remediation_turns=1,
        maximum_rounds=3,
        rounds_used=3,
        maximum_turns=40,
        turns_used=7,
    )
    assert (again.rounds_used, again.within) == (4, False)
    # Turns are a budget of their own (repair and validation turns count).
    assert not charge(
        reviews=1,
        remediation_turns=5,
        maximum_rounds=3,
        rounds_used=0,
        maximum_turns=5,
        turns_used=0,
    ).within


@pytest.mark.requirement("004:F19")
def test_a_signoff_binds_the_accepted_design_digest() -> None:
    digest = DESIGN["digest"]
    assert signoff_refusal("awaiting-signoff", digest, digest) is None
    stale = signoff_refusal("awaiting-signoff", digest, "sha256:" + "0" * 64)
    assert stale is not None and stale.reason == "stale-signoff"
    assert signoff_refusal("ready-for-next-stage", digest, digest) is not None
    refusal = reopen_refusal("ready-for-next-stage")
    assert refusal is not None and refusal.reason == "not-human-resolution"


@pytest.mark.requirement("004:F20")
def test_scope_and_target_are_checked_at_intake() -> None:
    assert intake_refusal("implementation", "merged", [("p1", ())]) is None
    assert intake_refusal("design-only", "pr-ready", []) is None
    for scope, target, phases in (
        ("design-only", "deployed", []),
        ("design-only", "pr-ready", [("p1", ())]),
        ("implementation", "pr-ready", []),
    ):
        refusal = intake_refusal(scope, target, phases)
        assert refusal is not None and refusal.reason == "unsupported-scope"
    cyclic = intake_refusal("implementation", "pr-ready", [("p1", ("p2",)), ("p2", ("p1",))])
    assert cyclic is not None and cyclic.reason == "invalid-phases"


def _view(**extra: Any) -> FeatureView:
    values: dict[str, Any] = {
        "scope": "implementation",
        "phases": (("p1", ()), ("p2", ("p1",))),
        "state": "ready-for-next-stage",
        "version": 2,
        "active": None,
        "accepted": frozenset({"design"}),
        "accepted_inputs": {"requirements": REQ, "design": DESIGN},
    }
    return FeatureView(**(values | extra))


@pytest.mark.requirement("004:F20")
def test_design_only_finalize_cannot_end_an_implementation_feature() -> None:
    refusal = start_refusal(_view(), 2, "finalize", None, {"requirements": REQ, "design": DESIGN})
    assert refusal is not None and refusal.reason == "dependency"
    done = _view(accepted=frozenset({"design", "implement-phase:p1", "implement-phase:p2"}))
    assert start_refusal(done, 2, "finalize", None, {"requirements": REQ, "design": DESIGN}) is None


@pytest.mark.requirement("004:F6")
def test_a_stage_must_carry_the_accepted_bindings() -> None:
    stale = {
        "requirements": REQ,
        "design": {"id": "artifact:design", "digest": "sha256:" + "1" * 64},
    }
    refusal = start_refusal(_view(), 2, "implement-phase", "p1", stale)
    assert refusal is not None and refusal.reason == "stale-input"
    extra = {"requirements": REQ, "design": DESIGN, "plan": DESIGN}
    refusal = start_refusal(_view(), 2, "implement-phase", "p1", extra)
    assert refusal is not None and refusal.reason == "unknown-input"


@pytest.mark.requirement("004:F2")
def test_the_start_checks_run_in_order_version_owner_successor_inputs() -> None:
    inputs = {"requirements": REQ, "design": DESIGN}
    assert start_refusal(_view(), 1, "plan", None, inputs).reason == "stale-version"  # type: ignore[union-attr]
    owned = _view(active=EXECUTION, state="stage-running")
    assert start_refusal(owned, 2, "plan", None, inputs).reason == "conflicting-owner"  # type: ignore[union-attr]
    assert start_refusal(_view(), 2, "implement-phase", "p2", inputs).reason == "dependency"  # type: ignore[union-attr]
    assert (
        start_refusal(_view(), 2, "design", None, {"requirements": REQ}).reason
        == "already-accepted"
    )  # type: ignore[union-attr]
    assert start_refusal(_view(), 2, "implement-phase", "p1", inputs) is None


def _full(codex: str = "c1", claude: str = "c1") -> list[FullReview]:
    return [
        FullReview("codex", "codex-s", codex, True),
        FullReview("claude", "claude-s", claude, True),
    ]


def _fix(before: str, after: str, **extra: Any) -> Transition:
    values: dict[str, Any] = {
        "before": before,
        "after": after,
        "impact": "local",
        "checks_passed": True,
        "reviewer": "claude",
        "session": "claude-s",
        "accepted": True,
    }
    return Transition(**(values | extra))


@pytest.mark.requirement("004:F18")
def test_a_resumed_reviewer_closes_a_local_fix() -> None:
    assert coverage_refusal(_full(), [], "c1") is None
    assert coverage_refusal(_full(), [_fix("c1", "c2")], "c2") is None


@pytest.mark.requirement("004:F18")
def test_a_broad_missing_or_substituted_transition_is_refused() -> None:
    cases = {
        "coverage-broad": ([_fix("c1", "c2", impact="broad")], "c2"),
        "coverage-gap": ([_fix("c9", "c2")], "c2"),
        "coverage-session": ([_fix("c1", "c2", session="claude-new")], "c2"),
    }
    for reason, (steps, current) in cases.items():
        refusal = coverage_refusal(_full(), steps, current)
        assert refusal is not None and refusal.reason == reason
    # A change nobody reviewed, and full reviews in the wrong order.
    missing = coverage_refusal(_full(), [], "c2")
    assert missing is not None and missing.reason == "coverage-gap"
    wrong = coverage_refusal(list(reversed(_full())), [], "c1")
    assert wrong is not None and wrong.reason == "coverage-order"
