"""The in-process outcome hub: committed ends are handed over; NOTIFYs during a completion wait."""

from __future__ import annotations

import pytest

from runtime.scheduler.models import RunSnapshot
from runtime.scheduler.outcomes import OutcomeHub

ENDED = RunSnapshot(state="COMPLETED", result={"a": 1}, error=None, effect_state="none")


def test_a_committed_end_is_handed_to_every_waiter_of_the_run_only() -> None:
    hub = OutcomeHub()
    mine: list[RunSnapshot | None] = []
    other: list[RunSnapshot | None] = []
    hub.subscribe("run-1", mine.append)
    hub.subscribe("run-2", other.append)
    with hub.settling("run-1") as settlement:
        settlement.hand(ENDED)
    assert mine == [ENDED]
    assert other == []


def test_a_notify_is_held_only_while_a_completion_of_that_run_is_in_flight() -> None:
    hub = OutcomeHub()
    assert hub.hold("run-1") is False
    with hub.settling("run-1"):
        assert hub.hold("run-1") is True
        assert hub.hold("run-2") is False
    assert hub.hold("run-1") is False


def test_a_completion_that_ends_nothing_wakes_waiters_only_if_it_held_a_notify() -> None:
    hub = OutcomeHub()
    received: list[RunSnapshot | None] = []
    hub.subscribe("run-1", received.append)
    with hub.settling("run-1"):
        pass  # more tasks to run: nothing to hand over, nothing held
    assert received == []
    with hub.settling("run-1"):
        hub.hold("run-1")  # e.g. a cancel committed elsewhere meanwhile
    assert received == [None]  # None: read the run


def test_a_failed_completion_wakes_waiters_to_read_the_run() -> None:
    hub = OutcomeHub()
    received: list[RunSnapshot | None] = []
    unsubscribe = hub.subscribe("run-1", received.append)
    with pytest.raises(RuntimeError), hub.settling("run-1"):
        raise RuntimeError("lease lost")
    assert received == [None]
    unsubscribe()
    with hub.settling("run-1") as settlement:
        settlement.hand(ENDED)
    assert received == [None]
