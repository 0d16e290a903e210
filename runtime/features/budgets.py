"""The remediation and turn budgets (seed 004 F17): pure, no I/O.

The default is three remediation rounds after the initial review, per stage key; consumption
survives reopen, replacement stage instances and reviewer replacement, so a reopened stage gets
only what is left. Exhaustion means HUMAN_RESOLUTION_REQUIRED, never auto-approval.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Charge:
    """What one StageResult consumed, and whether it stays within the budget."""

    rounds: int
    turns: int
    rounds_used: int
    turns_used: int
    within: bool


def rounds_left(maximum: int, used: int) -> int:
    """Remediation rounds a new stage execution may still dispatch (never negative)."""
    return max(0, maximum - used)


def charge(
    *,
    reviews: int,
    remediation_turns: int,
    maximum_rounds: int,
    rounds_used: int,
    maximum_turns: int,
    turns_used: int,
) -> Charge:
    """Charge a result's rounds (reviews after the initial one) and turns (every review and
    every remediation turn, validation and repair turns included)."""
    rounds = max(0, reviews - 1)
    turns = reviews + remediation_turns
    total_rounds = rounds_used + rounds
    total_turns = turns_used + turns
    return Charge(
        rounds=rounds,
        turns=turns,
        rounds_used=total_rounds,
        turns_used=total_turns,
        within=total_rounds <= maximum_rounds and total_turns <= maximum_turns,
    )
