"""Task timeouts, the workflow timeout and retry attempt durations run on the injected clock."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.engine.run import HttpRequest, HttpResponse, RunLimits, RunOutcome, run_workflow
from tests.support.engine import ERRORS, InstantClock, StubPort, definition

NO_DEADLINE = RunLimits(total_deadline_ms=None)


async def run(do: list[Any], clock: InstantClock, **extra: Any) -> RunOutcome:
    return await run_workflow(definition(do, **extra), {}, StubPort(), NO_DEADLINE, clock=clock)


def fault_of(outcome: RunOutcome) -> tuple[str, int, str]:
    assert outcome.fault is not None
    return outcome.fault["type"], outcome.fault["status"], outcome.fault["instance"]


async def test_a_task_timeout_cuts_a_wait_at_exactly_the_timeout_on_the_clock() -> None:
    clock = InstantClock()
    outcome = await run([{"nap": {"wait": "PT2S", "timeout": {"after": "PT0.2S"}}}], clock)
    assert fault_of(outcome) == (ERRORS + "timeout", 408, "/do/0/nap")
    assert clock.sleeps == [0.2]
    assert outcome.error is not None and outcome.error.code == "WORKFLOW_TASK_FAILED"


async def test_the_same_timed_out_definition_always_fails_the_same_way() -> None:
    do = [{"nap": {"wait": "PT2S", "timeout": {"after": "PT0.2S"}}}]
    outcomes = [fault_of(await run(do, InstantClock())) for _ in range(5)]
    assert len(set(outcomes)) == 1


async def test_a_task_timeout_is_not_swallowed_by_a_try_inside_the_task() -> None:
    inner = {
        "try": [{"nap": {"wait": "PT5S"}}],
        "catch": {"errors": {"with": {"status": 408}}, "do": [{"x": {"set": {"caught": True}}}]},
    }
    outer = {"outer": {"do": [{"guarded": inner}], "timeout": {"after": "PT1S"}}}
    outcome = await run([outer], InstantClock())
    assert fault_of(outcome) == (ERRORS + "timeout", 408, "/do/0/outer")


async def test_the_workflow_timeout_ends_the_run_with_workflow_timeout() -> None:
    clock = InstantClock()
    do = [{"a": {"wait": "PT1S"}}, {"b": {"wait": "PT1S"}}, {"c": {"set": {"late": True}}}]
    outcome = await run(do, clock, timeout={"after": "PT1.5S"})
    assert fault_of(outcome) == (ERRORS + "timeout", 408, "/")
    assert clock.sleeps == [1.0, 0.5]
    assert outcome.error is not None and outcome.error.code == "WORKFLOW_TIMEOUT"


async def test_the_workflow_timeout_is_also_checked_at_task_boundaries() -> None:
    clock = InstantClock()
    clock.time = 100.0
    do = [{"a": {"wait": "PT1S"}}, {"b": {"set": {"late": True}}}]
    outcome = await run(do, clock, timeout={"after": "PT1S"})
    assert fault_of(outcome)[2] == "/" and clock.sleeps == [1.0]


async def test_a_task_timeout_longer_than_the_run_deadline_is_bounded_by_the_deadline() -> None:
    clock = InstantClock()
    do = [{"nap": {"wait": "PT10S", "timeout": {"after": "PT5S"}}}]
    outcome = await run_workflow(
        definition(do), {}, StubPort(), RunLimits(total_deadline_ms=1000), clock=clock
    )
    assert fault_of(outcome) == (ERRORS + "timeout", 408, "/")
    assert clock.sleeps == [1.0]


async def test_each_retry_attempt_is_cut_at_the_attempt_duration_and_retried() -> None:
    clock = InstantClock()
    limit = {"attempt": {"count": 2, "duration": "PT0.5S"}}
    retry = {"delay": {"milliseconds": 100}, "limit": limit}
    task = {
        "t": {
            "try": [{"slow": {"wait": "PT2S"}}],
            "catch": {"errors": {"with": {"status": 408}}, "retry": retry},
        }
    }
    outcome = await run([task], clock)
    assert fault_of(outcome) == (ERRORS + "timeout", 408, "/do/0/t")
    assert clock.sleeps == pytest.approx([0.5, 0.1, 0.5, 0.1, 0.5])


async def test_an_attempt_that_finishes_within_its_duration_is_not_cut() -> None:
    clock = InstantClock()
    retry = {"limit": {"attempt": {"count": 2, "duration": "PT1S"}}}
    task = {
        "t": {
            "try": [{"quick": {"wait": "PT0.5S"}}, {"done": {"set": {"ok": True}}}],
            "catch": {"retry": retry},
        }
    }
    outcome = await run([task], clock)
    assert outcome.output == {"ok": True} and clock.sleeps == [0.5]


async def test_a_fork_branch_timeout_does_not_cut_its_sibling() -> None:
    clock = InstantClock()
    branches = [
        {"short": {"wait": "PT3S", "timeout": {"after": "PT1S"}}},
        {"long": {"wait": "PT2S"}},
    ]
    task = {"f": {"fork": {"branches": branches, "compete": True}}}
    outcome = await run([task], clock)
    assert outcome.status == "completed"


class SlowPort(StubPort):
    """An HTTP call that only ever ends by being cut."""

    async def call_http(self, request: HttpRequest) -> HttpResponse:
        import asyncio

        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_an_in_flight_call_is_cut_at_the_task_timeout() -> None:
    get = {"call": "http", "with": {"method": "get", "endpoint": "http://127.0.0.1:18080/x"}}
    do = [{"get": {**get, "timeout": {"after": "PT0.05S"}}}]
    outcome = await run_workflow(definition(do), {}, SlowPort(), NO_DEADLINE)
    assert fault_of(outcome) == (ERRORS + "timeout", 408, "/do/0/get")
