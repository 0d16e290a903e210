"""Durable timers in the pure interpreter: which waits park, under which keys, and the replay."""

from __future__ import annotations

import asyncio
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


async def test_short_waits_sleep_in_the_slot_and_a_fork_whose_branches_all_wait_parks() -> None:
    branches = [{"a": {"wait": "PT1M"}}, {"b": {"wait": "PT2M"}}]
    do = [
        {"short": {"wait": "PT0.5S"}},
        {"both": {"fork": {"branches": branches}}},
        {"after": {"set": {"ok": True}}},
    ]
    clock = InstantClock()
    first = await attempt(do, clock)
    # The short wait slept in the slot; then both branches waited, so the run parked as a
    # whole until the earlier due time, with both waits' keys held for the replay.
    assert isinstance(first, AwaitingTimer) and clock.sleeps[0] == 0.5
    a, b = "/do/1/both/fork/branches/0/a#0", "/do/1/both/fork/branches/1/b#0"
    assert sorted(first.parked) == [a, b] and first.due == first.timers[a]
    assert 50 < first.timers[b] - first.timers[a] < 70
    # Branch a's due time passed: a ends, b alone waits, and the run parks again for b.
    state = RunState.from_json(first.state)
    state.timers, state.parked = {**first.timers, a: time.time() - 1}, list(first.parked)
    second = await attempt(do, clock, state)
    assert isinstance(second, AwaitingTimer) and second.parked == (b,)
    assert second.due == first.timers[b]
    outcome = await attempt(do, clock, resumed(second, due_passed=True))
    assert isinstance(outcome, RunOutcome) and outcome.status == "completed"
    assert outcome.output == {"ok": True}


class GatedPort(StubPort):
    """A stub whose POST to /slow answers only once the clock has slept ``until`` seconds."""

    def __init__(self, clock: InstantClock, until: float) -> None:
        super().__init__()
        self.clock, self.until = clock, until

    async def call_http(self, request: Any) -> Any:
        if request.uri.endswith("/slow"):
            while self.until not in self.clock.sleeps:
                await asyncio.sleep(0)
            for _ in range(10):  # the waiting branch resumes from its ended sleep first
                await asyncio.sleep(0)
        return await super().call_http(request)


async def test_a_branch_wait_sleeps_in_the_slot_while_a_sibling_writes_and_nothing_is_cut() -> None:
    clock = InstantClock()
    port = GatedPort(clock, 90.0)
    slow = {"call": "http", "with": {"method": "post", "endpoint": "http://stub/echo/slow"}}
    branches = [{"a": {"wait": "PT90S"}}, {"b": slow}]
    do = [{"both": {"fork": {"branches": branches}}}, {"after": {"set": {"ok": True}}}]
    outcome = await run_workflow(definition(do), {}, port, PARKING, clock=clock)
    # Parking would have cancelled b's write in flight: a slept in the slot instead.
    assert isinstance(outcome, RunOutcome) and outcome.status == "completed", outcome
    assert clock.sleeps == [90.0] and len(port.http_calls) == 1


async def test_after_a_branch_failed_the_waits_of_the_branches_before_it_sleep_in_the_slot() -> (
    None
):
    boom = {"raise": {"error": {"type": "about:blank", "status": 500, "title": "boom"}}}
    branches = [{"a": {"wait": "PT1M"}}, {"b": boom}]
    clock = InstantClock()
    outcome = await attempt([{"both": {"fork": {"branches": branches}}}], clock)
    assert isinstance(outcome, RunOutcome) and outcome.fault is not None
    assert outcome.fault["status"] == 500 and clock.sleeps == [60.0]


def later(parked: AwaitingTimer, seconds: float) -> RunState:
    """The state a durable runner resumes a parked run with, ``seconds`` after it parked."""
    state = RunState.from_json(parked.state)
    state.timers = {key: due - seconds for key, due in parked.timers.items()}
    state.parked = list(parked.parked)
    return state


async def test_a_wait_its_task_timeout_cuts_first_parks_until_the_timeout_then_times_out() -> None:
    clock = InstantClock()
    do = [{"nap": {"wait": "PT1M", "timeout": {"after": "PT5S"}}}]
    parked = await attempt(do, clock)
    assert isinstance(parked, AwaitingTimer) and parked.parked == ("/do/0/nap#0",)
    assert 4 < parked.due - time.time() <= 5 and clock.sleeps == []
    outcome = await attempt(do, clock, later(parked, 5))
    assert isinstance(outcome, RunOutcome) and outcome.fault is not None
    assert outcome.fault["type"] == ERRORS + "timeout"
    assert outcome.fault["instance"] == "/do/0/nap" and max(clock.sleeps) < 0.1


async def test_a_task_timeout_counts_from_its_first_start_across_parked_waits() -> None:
    naps = [{"one": {"wait": "PT1M"}}, {"two": {"wait": "PT1M"}}]
    do = [{"naps": {"do": naps, "timeout": {"after": "PT90S"}}}]
    clock = InstantClock()
    first = await attempt(do, clock)
    assert isinstance(first, AwaitingTimer) and 55 < first.due - time.time() <= 60
    # Sixty seconds on, the second wait has thirty left of its task's ninety: the timeout
    # cuts it first (a timeout started again on the replay would have let it park a minute).
    second = await attempt(do, clock, later(first, 60))
    assert isinstance(second, AwaitingTimer) and 25 < second.due - time.time() <= 30
    outcome = await attempt(do, clock, later(second, 30))
    assert isinstance(outcome, RunOutcome) and outcome.fault is not None
    assert outcome.fault["type"] == ERRORS + "timeout"
    assert outcome.fault["instance"] == "/do/0/naps"


async def test_a_replay_runs_the_timed_out_tasks_work_before_the_wait_that_parked() -> None:
    mark = {"set": {"m": 1}, "export": {"as": {"marked": True}}}
    inner = {"do": [{"mark": mark}, {"nap": {"wait": "PT1M"}}], "timeout": {"after": "PT5S"}}
    report = {"set": {"marked": "${ context.marked }"}}
    guarded = {
        "try": [{"inner": inner}],
        "catch": {"errors": {"with": {"status": 408}}, "do": [{"report": report}]},
    }
    do = [{"guarded": guarded}]
    clock = InstantClock()
    parked = await attempt(do, clock)
    assert isinstance(parked, AwaitingTimer)
    outcome = await attempt(do, clock, later(parked, 5))
    # The replay ran `mark` again (its deadline held until the wait): its export is there
    # when the timeout is caught, as when the timeout cut the wait in the slot.
    assert isinstance(outcome, RunOutcome) and outcome.status == "completed", outcome
    assert outcome.output == {"marked": True}


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
