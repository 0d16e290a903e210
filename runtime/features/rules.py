"""The stage handoff rules (seed 004 [Enforced Stage Handoffs], [Broader Intake]): pure, no I/O.

A feature is a plain snapshot (FeatureView); each rule answers with the refusal reason, or None
when the transition is allowed. The ledger applies them under the feature's row lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The states a stage may start from, and the terminal ones nothing leaves.
READY = "ready-for-next-stage"
RUNNING = "stage-running"
AWAITING_SIGNOFF = "awaiting-signoff"
HUMAN = "human-resolution-required"
COMPLETED = "completed"
CANCELLED = "cancelled"
TERMINAL = frozenset({COMPLETED, CANCELLED})

SCOPES = frozenset({"design-only", "implementation"})
TARGETS = frozenset({"pr-ready", "merged", "deployed"})


@dataclass(frozen=True)
class Refusal:
    """Why a feature operation is refused: a stable reason and a sentence for people."""

    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FeatureView:
    """What the rules read of a feature run."""

    scope: str
    phases: tuple[tuple[str, tuple[str, ...]], ...]
    state: str
    version: int
    active: str | None
    accepted: frozenset[str]
    accepted_inputs: dict[str, dict[str, str]]


def stage_key(kind: str, phase_id: str | None) -> str:
    """The transition id of a stage: design, plan, implement-phase:<phaseId> or finalize."""
    return f"{kind}:{phase_id}" if kind == "implement-phase" else kind


def intake_refusal(
    scope: str, target: str, phases: list[tuple[str, tuple[str, ...]]]
) -> Refusal | None:
    """F20: scope and completion target are pinned at intake; unsupported combinations fail."""
    if scope == "design-only" and target != "pr-ready":
        return Refusal(
            "unsupported-scope",
            "a design-only feature completes at pr-ready (its design is published); "
            f"completion target {target} needs an implementation scope",
        )
    if scope == "design-only" and phases:
        return Refusal("unsupported-scope", "a design-only feature takes no phases")
    if scope == "implementation" and not phases:
        return Refusal("unsupported-scope", "an implementation feature needs at least one phase")
    names = [name for name, _ in phases]
    if len(set(names)) != len(names):
        return Refusal("invalid-phases", "phase ids must be unique")
    known: set[str] = set()
    for name, depends in phases:
        # Dependencies name earlier phases only, so the order is acyclic by construction.
        unknown = [d for d in depends if d not in known]
        if unknown:
            return Refusal(
                "invalid-phases",
                f"phase {name} depends on {', '.join(unknown)}, which is not an earlier phase",
            )
        known.add(name)
    return None


def _state_refusal(feature: FeatureView) -> Refusal | None:
    if feature.state in TERMINAL:
        return Refusal("feature-terminal", f"the feature run is {feature.state}")
    if feature.active is not None or feature.state == RUNNING:
        return Refusal(
            "conflicting-owner",
            "another stage owns the feature; accept or cancel it first",
            {"activeStageExecutionId": feature.active},
        )
    if feature.state == AWAITING_SIGNOFF:
        return Refusal("signoff-pending", "the design waits for its sign-off decision")
    if feature.state == HUMAN:
        return Refusal("human-resolution-required", "the feature needs a person's decision first")
    return None


def _successor_refusal(feature: FeatureView, kind: str, phase_id: str | None) -> Refusal | None:
    key = stage_key(kind, phase_id)
    if key in feature.accepted:
        return Refusal("already-accepted", f"stage {key} is already accepted")
    if kind == "design":
        return None if phase_id is None else Refusal("invalid-stage", "design takes no phaseId")
    if "design" not in feature.accepted:
        return Refusal("dependency", f"stage {key} needs the accepted design first")
    if kind in ("plan", "implement-phase") and feature.scope != "implementation":
        return Refusal("scope", f"a {feature.scope} feature has no {kind} stage")
    if kind == "plan":
        return None
    if kind == "implement-phase":
        return _phase_refusal(feature, phase_id)
    missing = [
        name for name, _ in feature.phases if f"implement-phase:{name}" not in feature.accepted
    ]
    if missing:
        return Refusal(
            "dependency", f"finalize needs every phase accepted; missing: {', '.join(missing)}"
        )
    return None


def _phase_refusal(feature: FeatureView, phase_id: str | None) -> Refusal | None:
    depends = dict(feature.phases)
    if phase_id is None or phase_id not in depends:
        return Refusal("invalid-stage", f"the feature has no phase {phase_id}")
    missing = [d for d in depends[phase_id] if f"implement-phase:{d}" not in feature.accepted]
    if missing:
        return Refusal(
            "dependency",
            f"phase {phase_id} needs {', '.join(missing)} accepted first",
            {"missing": missing},
        )
    return None


def required_inputs(feature: FeatureView, kind: str) -> dict[str, dict[str, str]]:
    """The bindings a stage must carry: requirements always, the accepted design after design."""
    names = ["requirements"] + ([] if kind == "design" else ["design"])
    return {
        name: feature.accepted_inputs[name] for name in names if name in feature.accepted_inputs
    }


def _input_refusal(
    feature: FeatureView, kind: str, inputs: dict[str, dict[str, str]]
) -> Refusal | None:
    required = required_inputs(feature, kind)
    stale = sorted(name for name, binding in required.items() if inputs.get(name) != binding)
    if stale:
        return Refusal(
            "stale-input",
            f"inputs {', '.join(stale)} are not the feature's accepted bindings",
            {"inputs": stale, "expected": {name: required[name] for name in stale}},
        )
    extra = sorted(set(inputs) - set(required))
    if extra:
        return Refusal("unknown-input", f"inputs {', '.join(extra)} are not bindings of this stage")
    return None


def start_refusal(
    feature: FeatureView,
    expected_version: int,
    kind: str,
    phase_id: str | None,
    inputs: dict[str, dict[str, str]],
) -> Refusal | None:
    """F2/F3/F8: a new claim needs the current version, no owner, an allowed successor and
    inputs equal to the accepted bindings (checked in this order)."""
    if expected_version != feature.version:
        return Refusal(
            "stale-version",
            f"expectedVersion {expected_version} is not the feature's version {feature.version}",
            {"currentVersion": feature.version},
        )
    return (
        _state_refusal(feature)
        or _successor_refusal(feature, kind, phase_id)
        or _input_refusal(feature, kind, inputs)
    )


def state_after_acceptance(kind: str, require_signoff: bool) -> str:
    """Where an accepted stage leaves the feature (F8: acceptance does not complete it,
    except finalize's)."""
    if kind == "finalize":
        return COMPLETED
    if kind == "design" and require_signoff:
        return AWAITING_SIGNOFF
    return READY
