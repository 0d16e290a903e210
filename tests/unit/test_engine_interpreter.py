"""Interpreter behaviour beyond the conformance scenarios: effects, results, checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.engine import parse_definition
from runtime.engine.run import RunLimits, RunState, run_workflow
from tests.support.engine import OBJECT_WITH_OK, StubPort, definition
from tests.support.shared import set_assert_definitions


@pytest.mark.parametrize("source", set_assert_definitions())
async def test_simple_set_assert_reference_runs_unchanged(source: Path) -> None:
    parsed = parse_definition(yaml.safe_load(source.read_text()))
    outcome = await run_workflow(parsed, {"applicantId": "A-7"}, StubPort())
    assert outcome.output == {
        "applicantId": "A-7",
        "status": "APPROVED",
        "verified": True,
        "message": "Workflow completed by simple-set-assert",
    }


async def test_failed_assert_faults_validation_and_maps_to_task_failed() -> None:
    parsed = definition([{"check": {"assert": {"value": "${ .x }", "equals": 1}}}])
    outcome = await run_workflow(parsed, {"x": 2}, StubPort())
    assert outcome.fault is not None and outcome.fault["status"] == 400
    assert outcome.error is not None and outcome.error.code == "WORKFLOW_TASK_FAILED"
    assert "/do/0/check" in outcome.error.message


async def test_a_set_entry_reading_an_absent_field_fails_the_run_with_an_expression_error() -> None:
    # Issue 40 black-box (a): the run used to complete without `r`.
    parsed = definition([{"build": {"set": {"r": "${ input.maybe + 'x' }", "k": 1}}}])
    outcome = await run_workflow(parsed, {}, StubPort())
    assert outcome.output is None
    assert outcome.error is not None and outcome.error.code == "WORKFLOW_TASK_FAILED"
    assert "/do/0/build" in outcome.error.message
    assert "maybe" in outcome.error.message
    present = await run_workflow(parsed, {"maybe": "y"}, StubPort())
    assert present.output == {"r": "yx", "k": 1}


async def test_write_call_marks_effect_possible_then_confirmed() -> None:
    seen: list[str] = []

    class Port(StubPort):
        async def call_http(self, request: Any) -> Any:
            seen.append(state_ref[0].effect_state)
            return await super().call_http(request)

    state_ref: list[RunState] = [RunState(0, None, {}, {"id": "a"})]
    parsed = definition(
        [{"echo": {"call": "http", "with": {"method": "post", "endpoint": "http://h/echo/{id}"}}}]
    )
    outcome = await run_workflow(parsed, {"id": "a"}, Port(), resume=None, on_checkpoint=None)
    assert outcome.effect_state == "confirmed"
    state_ref[0] = RunState(0, {"id": "a"}, {}, {"id": "a"})
    await run_workflow(parsed, {"id": "a"}, Port(), resume=state_ref[0])
    assert seen[-1] == "possible"


async def test_read_only_calls_leave_effect_state_none() -> None:
    parsed = definition(
        [{"r": {"call": "http", "with": {"method": "get", "endpoint": "http://h/status/200"}}}]
    )
    outcome = await run_workflow(parsed, {}, StubPort())
    assert outcome.effect_state == "none"


async def test_invalid_output_before_an_effect_is_output_invalid() -> None:
    parsed = definition([{"a": {"set": {"bad": 1}}}], output={"schema": OBJECT_WITH_OK})
    outcome = await run_workflow(parsed, {}, StubPort())
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.after_effect) == ("WORKFLOW_OUTPUT_INVALID", False)


async def test_invalid_output_after_an_effect_is_not_retryable() -> None:
    parsed = definition(
        [{"add": {"call": "mcp", "with": {"tool": "add", "arguments": {"a": 1, "b": 2}}}}],
        output={"schema": OBJECT_WITH_OK},
    )
    outcome = await run_workflow(parsed, {}, StubPort())
    assert outcome.error is not None
    assert outcome.error.code == "WORKFLOW_OUTPUT_INVALID_AFTER_EFFECT"
    assert outcome.error.retryable is False


async def test_nested_call_budget_stops_extra_mcp_calls() -> None:
    call = {"call": "mcp", "with": {"tool": "add", "arguments": {"a": 1, "b": 2}}}
    parsed = definition([{"one": call}, {"two": call}])
    outcome = await run_workflow(parsed, {}, StubPort(), RunLimits(maximum_nested_calls=1))
    assert outcome.fault is not None and outcome.fault["instance"] == "/do/1/two"


@pytest.mark.parametrize("source", set_assert_definitions())
async def test_checkpoints_between_top_level_tasks_are_plain_json_and_resume(source: Path) -> None:
    parsed = parse_definition(yaml.safe_load(source.read_text()))
    saved: list[dict[str, Any]] = []

    async def checkpoint(state: RunState) -> None:
        saved.append(state.to_json())

    full = await run_workflow(parsed, {"applicantId": "A-1"}, StubPort(), on_checkpoint=checkpoint)
    assert [s["position"] for s in saved] == [1, 2, 3]
    resumed = await run_workflow(
        parsed, {"applicantId": "A-1"}, StubPort(), resume=RunState.from_json(saved[0])
    )
    assert resumed.output == full.output


async def test_wait_outputs_its_input_through_the_clock() -> None:
    from tests.support.engine import InstantClock

    clock = InstantClock()
    outcome = await run_workflow(
        definition([{"w": {"wait": {"seconds": 3}}}]), {"k": 1}, StubPort(), clock=clock
    )
    assert (outcome.output, clock.sleeps) == ({"k": 1}, [3.0])


async def test_for_collection_beyond_the_bound_faults() -> None:
    loop = {"l": {"for": {"in": ".xs"}, "do": [{"s": {"set": {"n": "${ item }"}}}]}}
    outcome = await run_workflow(
        definition([loop]), {"xs": [1, 2, 3]}, StubPort(), RunLimits(maximum_iterations=2)
    )
    assert outcome.fault is not None and outcome.fault["instance"] == "/do/0/l"


async def test_string_export_replaces_the_context_and_skipped_task_exports_nothing() -> None:
    parsed = definition(
        [
            {"a": {"set": {"v": 1}, "export": {"as": "${ {'only': output.v} }"}}},
            {"b": {"if": "false", "set": {}, "export": {"as": {"never": 1}}}},
        ],
        output={"as": "${ context }"},
    )
    assert (await run_workflow(parsed, {}, StubPort())).output == {"only": 1}


async def test_run_deadline_expiry_maps_to_workflow_timeout() -> None:
    parsed = definition([{"w": {"wait": "PT1S"}}])
    outcome = await run_workflow(parsed, {}, StubPort(), RunLimits(total_deadline_ms=50))
    assert outcome.error is not None and outcome.error.code == "WORKFLOW_TIMEOUT"
