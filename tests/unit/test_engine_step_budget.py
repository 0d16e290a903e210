"""The step budget and off-loop interpretation: deterministic stops, effects on the serving loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from runtime.engine import parse_definition
from runtime.engine.run import (
    EngineThreads,
    HttpRequest,
    HttpResponse,
    LoopBoundEffects,
    RunLimits,
    run_workflow,
)
from runtime.engine.step_meter import StepBudgetExhausted, StepMeter, metering
from tests.unit.test_engine_conformance import StubPort

HEADER = {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"}
UNBOUNDED = RunLimits(total_deadline_ms=None)


def nested_loops(depth: int = 3) -> Any:
    """`depth` nested for loops over the input's items around one CEL-evaluating set task."""
    body: list[Any] = [{"add": {"set": {"total": "${ a * 2 + 1 }"}}}]
    for level in reversed(range(depth)):
        each = "a" if level == depth - 1 else f"x{level}"
        loop = {"for": {"each": each, "in": "${ workflow.input.items }"}}
        body = [{f"loop{level}": {**loop, "do": body}}]
    return parse_definition({"document": dict(HEADER), "do": body})


async def steps_until_exhausted(definition: Any, data: Any, limit: int) -> int:
    meter = StepMeter(limit)
    with metering(meter), pytest.raises(StepBudgetExhausted):
        await run_workflow(definition, data, StubPort(), UNBOUNDED)
    return meter.steps


async def test_a_task_over_its_step_budget_stops_at_the_same_step_every_time() -> None:
    definition, data = nested_loops(), {"items": list(range(8))}
    first = await steps_until_exhausted(definition, data, 700)
    assert first > 700
    assert await steps_until_exhausted(definition, data, 700) == first


async def test_a_run_within_its_step_budget_completes_and_counts_tasks_and_cel_steps() -> None:
    meter = StepMeter(100_000)
    with metering(meter):
        outcome = await run_workflow(nested_loops(1), {"items": [1, 2]}, StubPort(), UNBOUNDED)
    assert outcome.status == "completed"
    # One loop task, two iterations of one set task, plus the CEL steps of three evaluations.
    assert meter.steps > 3


async def test_a_try_catch_in_the_definition_cannot_swallow_the_step_budget() -> None:
    definition = parse_definition(
        {
            "document": dict(HEADER),
            "do": [
                {
                    "guarded": {
                        "try": [{"work": {"do": [{"inner": {"set": {"n": "${ 1 + 1 }"}}}]}}],
                        "catch": {"do": [{"recover": {"set": {"recovered": True}}}]},
                    }
                }
            ],
        }
    )
    meter = StepMeter(2)
    with metering(meter), pytest.raises(StepBudgetExhausted):
        await run_workflow(definition, {}, StubPort(), UNBOUNDED)


class ThreadRecordingPort(StubPort):
    """Records which thread each HTTP call ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    async def call_http(self, request: HttpRequest) -> HttpResponse:
        self.threads.append(threading.get_ident())
        return await super().call_http(request)


async def test_effects_of_an_off_loop_run_execute_on_the_serving_loop_thread() -> None:
    port = ThreadRecordingPort()
    call = {"call": "http", "with": {"method": "post", "endpoint": "http://h/echo/x"}}
    definition = parse_definition({"document": dict(HEADER), "do": [{"get": call}]})
    effects = LoopBoundEffects(port, asyncio.get_running_loop())
    engine = EngineThreads(1)
    interpreted_on: list[int] = []

    async def work() -> Any:
        interpreted_on.append(threading.get_ident())
        return await run_workflow(definition, {}, effects, UNBOUNDED)

    try:
        outcome = await engine.run(work, StepMeter())
    finally:
        engine.close()
    assert outcome.status == "completed"
    # Tried on the serving loop first, it started over on a thread before its effect: the
    # effect was sent once, from the serving loop.
    assert port.threads == [threading.get_ident()]
    assert interpreted_on[0] == threading.get_ident()
    assert len(interpreted_on) == 2 and interpreted_on[1] != threading.get_ident()


async def test_the_serving_loop_runs_while_an_off_loop_run_computes_and_cancel_stops_it() -> None:
    meter = StepMeter()
    engine = EngineThreads(1)
    definition, data = nested_loops(), {"items": list(range(40))}
    job = asyncio.create_task(
        engine.run(lambda: run_workflow(definition, data, StubPort(), UNBOUNDED), meter)
    )
    seen: set[int] = set()
    try:
        # The loop observes the meter moving: it keeps running while the thread computes.
        while len(seen) < 3:
            assert not job.done()
            seen.add(meter.steps)
            await asyncio.sleep(0.005)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job
        stopped_at = meter.steps
        # A deliberate window (the thing under test): a thread still computing would move the
        # meter within it.
        await asyncio.sleep(0.05)
        assert meter.steps == stopped_at  # the thread let go before the cancel returned
    finally:
        engine.close()


async def test_a_small_attempt_runs_on_the_serving_loop_and_never_starts_a_thread() -> None:
    engine = EngineThreads(1)
    interpreted_on: list[int] = []

    async def work() -> Any:
        interpreted_on.append(threading.get_ident())
        return await run_workflow(nested_loops(1), {"items": [1, 2]}, StubPort(), UNBOUNDED)

    try:
        outcome = await engine.run(work, StepMeter())
    finally:
        engine.close()
    assert outcome.status == "completed"
    assert interpreted_on == [threading.get_ident()]
    assert engine._pool is None


async def run_counted(engine: EngineThreads, definition: Any, data: Any, limit: int | None) -> Any:
    meter = StepMeter(limit)
    try:
        outcome: Any = await engine.run(
            lambda: run_workflow(definition, data, StubPort(), UNBOUNDED), meter
        )
    except StepBudgetExhausted:
        outcome = "exhausted"
    finally:
        engine.close()
    return outcome if isinstance(outcome, str) else outcome.output, meter.steps


@pytest.mark.parametrize("limit", [None, 700])
async def test_an_attempt_that_outgrows_the_loop_starts_over_and_counts_as_if_off_loop(
    limit: int | None,
) -> None:
    definition, data = nested_loops(), {"items": list(range(8))}
    off_loop = await run_counted(EngineThreads(1, on_loop_steps=0), definition, data, limit)
    moved = await run_counted(EngineThreads(1, on_loop_steps=50), definition, data, limit)
    # Same output (or the same exhaustion) at the same step: starting over changed nothing.
    assert moved == off_loop
    assert off_loop[1] > 50
