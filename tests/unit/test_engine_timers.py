"""Durable timers in the pure interpreter: which waits park, under which keys, and the replay."""

from __future__ import annotations

import time
from typing import Any

import pytest

from runtime.engine.run import AwaitingTimer, RunLimits, RunOutcome, RunState, run_workflow
from tests.support.engine import ERRORS, InstantClock, StubPort, definition

pytestmark = pytest.mark.requirement("issue-42:durable-timers")

PARKING = RunLimits(total_deadline_ms=None, in_slot_wait_s=1.0)


async def attempt(
    do: list[Any], clock: InstantClock, state: RunState | None = None
) -> RunOutcome | AwaitingTimer:
    try:
        return await run_workflow(
            definition(do), {"n": 0}, StubPort(), PARKING, clock=clock, resume=state
        )
    except AwaitingTimer as parked:
        return parked


def resumed(parked: AwaitingTimer, *, due_passed: bool) -> RunState:
    """The state a durable runner resumes a parked run with (its due times passed or not)."""
    state = RunState.from_json(parked.state)
    past = time.time() - 1
    state.timers = {key: past if due_passed else due for key, due in parked.timers.items()}
    return state


async def test_each_wait_of_a_loop_parks_under_its_own_key_and_a_replay_passes_the_earlier() -> (
    None
):
    loop = {"for": {"in": "${ [1, 2, 3] }", "each": "item"}, "do": [{"nap": {"wait": "PT1M"}}]}
    do = [{"first": {"set": {"n": 1}}}, {"loop": loop}, {"last": {"set": {"done": True}}}]
    clock = InstantClock()
    outcome = await attempt(do, clock)
    keys: list[list[str]] = []
    while isinstance(outcome, AwaitingTimer):
        keys.append(sorted(outcome.timers))
        outcome = await attempt(do, clock, resumed(outcome, due_passed=True))
    assert keys == [
        ["/do/1/loop/do/0/nap#0"],
        ["/do/1/loop/do/0/nap#0", "/do/1/loop/do/0/nap#1"],
        ["/do/1/loop/do/0/nap#0", "/do/1/loop/do/0/nap#1", "/do/1/loop/do/0/nap#2"],
    ]
    assert outcome.status == "completed" and outcome.output == {"done": True}
    # No wait slept in the slot: each one parked, then found its due time passed.
    assert all(seconds == 0 for seconds in clock.sleeps)


async def test_a_wait_woken_before_its_due_time_parks_again_for_the_same_due_time() -> None:
    do = [{"nap": {"wait": "PT1H"}}]
    first = await attempt(do, InstantClock())
    assert isinstance(first, AwaitingTimer)
    again = await attempt(do, InstantClock(), resumed(first, due_passed=False))
    assert isinstance(again, AwaitingTimer)
    assert again.due == first.due and again.timers == first.timers
    assert 3590 < first.due - time.time() <= 3600


async def test_short_waits_and_waits_in_fork_branches_sleep_in_the_slot() -> None:
    branches = [{"a": {"wait": "PT1M"}}, {"b": {"wait": "PT2M"}}]
    do = [
        {"short": {"wait": "PT0.5S"}},
        {"both": {"fork": {"branches": branches}}},
        {"after": {"set": {"ok": True}}},
    ]
    clock = InstantClock()
    outcome = await attempt(do, clock)
    assert isinstance(outcome, RunOutcome) and outcome.status == "completed"
    assert sorted(clock.sleeps) == [0.5, 60.0, 120.0]


async def test_a_wait_its_task_timeout_cuts_first_times_out_in_the_slot_as_before() -> None:
    clock = InstantClock()
    outcome = await attempt([{"nap": {"wait": "PT1M", "timeout": {"after": "PT5S"}}}], clock)
    assert isinstance(outcome, RunOutcome) and outcome.fault is not None
    assert outcome.fault["type"] == ERRORS + "timeout" and clock.sleeps == [5.0]


async def test_a_retry_back_off_parks_and_the_replay_goes_on_with_the_next_attempt() -> None:
    retry = {"delay": {"seconds": 30}, "limit": {"attempt": {"count": 3}}}
    call = {"call": "http", "with": {"method": "get", "endpoint": "http://stub/flaky"}}
    guarded = {
        "try": [{"get": call}],
        "catch": {"errors": {"with": {"status": 503}}, "retry": retry},
    }
    port, clock = StubPort(), InstantClock()
    do = [{"guarded": guarded}]

    async def run_once(state: RunState | None) -> RunOutcome | AwaitingTimer:
        try:
            return await run_workflow(definition(do), {}, port, PARKING, clock=clock, resume=state)
        except AwaitingTimer as parked:
            return parked

    first = await run_once(None)
    assert isinstance(first, AwaitingTimer)
    assert sorted(first.timers) == ["/do/0/guarded/retry#0", "/do/0/guarded/started#0"]
    assert port.flaky_hits == 1
    # The pure interpreter sends the replayed read again (the durable runner answers it from
    # its read journal instead); the recorded back-off has passed, so the next attempt follows.
    state = RunState.from_json(first.state)
    state.timers = {key: time.time() - 1 for key in first.timers}
    second = await run_once(state)
    assert isinstance(second, RunOutcome) and second.status == "completed"
    assert port.flaky_hits == 3 and second.output == {"ok": True}
