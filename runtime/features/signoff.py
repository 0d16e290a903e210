"""Design sign-off (seed 004 F19): pure, no I/O.

A decision binds the exact accepted design digest: another digest (a stale or superseded design)
is refused; approve leaves the feature ready for its next stage, request-changes sends it back
to design, reject to a person. A task completion or a binding approval is no sign-off.
"""

from __future__ import annotations

from runtime.features.rules import AWAITING_SIGNOFF, HUMAN, READY, Refusal

OUTCOMES = {"approve": READY, "request-changes": READY, "reject": HUMAN}


def signoff_refusal(
    state: str, accepted_design: str | None, design_digest: str | None
) -> Refusal | None:
    """Why a sign-off decision cannot be recorded now, or None."""
    if state != AWAITING_SIGNOFF:
        return Refusal("no-signoff-pending", f"the feature is {state}, not awaiting sign-off")
    if design_digest is None or design_digest != accepted_design:
        return Refusal(
            "stale-signoff",
            "designDigest is not the accepted design's digest",
            {"designDigest": accepted_design},
        )
    return None


def reopen_refusal(state: str) -> Refusal | None:
    """Reopen is a person's explicit transition out of human resolution only."""
    if state != HUMAN:
        return Refusal("not-human-resolution", f"the feature is {state}; only {HUMAN} reopens")
    return None
