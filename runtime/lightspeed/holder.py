"""The holder's side of a reply: which source_resolution a Promise accepts (E7, E10, E16).

Pure rules, used by the simulated session (examples/lightspeed_holder.py) and by tests; we are
never a holder ourselves (the bridge refuses source_resolution addressed to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from runtime.lightspeed.envelope import Envelope
from runtime.lightspeed.ids import source_resolution_id


class Verdict(StrEnum):
    """What a holder does with one delivered source_resolution."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    FOREIGN_PRODUCER = "rejected_foreign_producer"
    NOT_A_WORKFLOW = "rejected_not_a_workflow_producer"
    UNKNOWN_PROMISE = "rejected_unknown_promise"
    TERMINAL = "ignored_promise_terminal"
    WRONG_ID = "rejected_emission_id_mismatch"
    NOT_A_RESOLUTION = "rejected_not_a_source_resolution"


@dataclass(frozen=True)
class PromiseSource:
    """The Promise as admitted: its immutable source and whether it is already terminal."""

    universe_id: str
    source_workflow_id: str
    holder_workflow_id: str
    terminal: bool = False


def admit_source_resolution(
    envelope: Envelope, promise: PromiseSource | None, seen: bool = False
) -> Verdict:
    """The holder rule: dedupe first, then producer == the Promise's recorded source."""
    if envelope.body.kind != "source_resolution":
        return Verdict.NOT_A_RESOLUTION
    if seen:
        return Verdict.DUPLICATE
    if promise is None:
        return Verdict.UNKNOWN_PROMISE
    producer = envelope.producer
    if producer.kind != "workflow":
        return Verdict.NOT_A_WORKFLOW
    if producer.workflow_id != promise.source_workflow_id:
        return Verdict.FOREIGN_PRODUCER
    expected = source_resolution_id(
        promise.universe_id,
        promise.source_workflow_id,
        promise.holder_workflow_id,
        envelope.body.fields["promise_id"],
    )
    if envelope.emission_id != expected:
        return Verdict.WRONG_ID
    if promise.terminal:
        return Verdict.TERMINAL
    return Verdict.ACCEPTED
