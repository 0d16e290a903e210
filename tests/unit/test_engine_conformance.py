"""Conformance scenarios s01–s15 of dsl-profile.md §7, run against an in-process stub port."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from runtime.engine import parse_definition
from runtime.engine.run import RunLimits, RunOutcome, run_workflow
from tests.support.engine import ERRORS, FIXTURES, InstantClock, StubPort


def load(name: str) -> Any:
    return parse_definition(yaml.safe_load((FIXTURES / f"{name}.yaml").read_text()))


async def run(name: str, data: Any, port: StubPort | None = None, **kwargs: Any) -> RunOutcome:
    return await run_workflow(load(name), data, port or StubPort(), RunLimits(), **kwargs)


def assert_fault(outcome: RunOutcome, kind: str, status: int, instance: str) -> None:
    assert outcome.status == "faulted"
    assert outcome.fault is not None
    assert outcome.fault["type"] == ERRORS + kind
    assert outcome.fault["status"] == status
    assert outcome.fault["instance"] == instance


async def test_s01_data_flow_reshapes_input_exports_and_builds_output() -> None:
    outcome = await run("s01", {"user": {"id": "u1"}, "noise": 1})
    assert outcome.output == {
        "result": {"userId": "u1", "tier": "gold"},
        "ctx": {"who": {"id": "u1", "tier": "gold"}},
    }


async def test_s01_input_missing_required_field_faults_validation_at_input() -> None:
    assert_fault(await run("s01", {}), "validation", 400, "/input")


@pytest.mark.parametrize(("score", "status"), [(20, "APPROVED"), (40, "REVIEW"), (90, "REJECTED")])
async def test_s02_switch_takes_first_match_default_and_end(score: int, status: str) -> None:
    assert (await run("s02", {"score": score})).output == {"status": status}


async def test_s03_switch_without_match_passes_data_through() -> None:
    assert (await run("s03", {"color": "yellow"})).output == {"color": "yellow"}
    assert (await run("s03", {"color": "red"})).output == {"painted": True}


async def test_s04_exit_named_jump_and_continue_leave_the_expected_trail() -> None:
    assert (await run("s04", {})).output == {"trail": ["a", "b", "d", "f"]}


async def test_s05_if_skips_task_and_requires_a_strict_bool() -> None:
    assert (await run("s05", {"vip": False})).output == {"done": True, "discount": 0}
    assert (await run("s05", {"vip": True})).output == {"done": True, "discount": 20}
    assert_fault(await run("s05", {"vip": "yes"}), "expression", 400, "/do/0/maybe")


async def test_s06_http_call_sends_method_template_query_headers_body_and_returns_response() -> (
    None
):
    outcome = await run("s06", {"id": "a1"})
    assert outcome.output == {
        "code": 200,
        "seg": "a1",
        "m": "POST",
        "q": "fast",
        "t": "t1",
        "b": "a1",
    }


@pytest.mark.parametrize(
    ("score", "status"), [(25, "APPROVED"), (30, "APPROVED"), (31, "REJECTED")]
)
async def test_s07_reference_decision_flow_routes_on_exported_risk(score: int, status: str) -> None:
    outcome = await run("s07", {"applicantId": "A-1"}, StubPort(score))
    assert outcome.output == {"status": status}
    assert outcome.state is not None
    assert outcome.state.context == {"risk": {"riskScore": score}}


async def test_s07_invalid_input_faults_before_any_call() -> None:
    port = StubPort()
    assert_fault(await run("s07", {}, port), "validation", 400, "/input")
    assert port.http_calls == []


async def test_s08_catch_filter_binds_error_and_runs_catch_do() -> None:
    outcome = await run("s08", {"code": 404})
    assert outcome.output == {"caught": 404, "at": "/do/0/guarded/try/0/get"}


async def test_s08_unmatched_error_propagates_with_http_status() -> None:
    assert_fault(await run("s08", {"code": 500}), "communication", 500, "/do/0/guarded/try/0/get")


async def test_s09_retry_with_exponential_backoff_succeeds_on_third_hit() -> None:
    port, clock = StubPort(), InstantClock()
    outcome = await run("s09", {}, port, clock=clock)
    assert outcome.output == {"ok": True}
    assert port.flaky_hits == 3
    assert clock.sleeps == [0.02, 0.04]


async def test_s09_retry_count_one_faults_after_two_hits() -> None:
    document = yaml.safe_load((FIXTURES / "s09.yaml").read_text())
    catch = document["do"][0]["resilient"]["catch"]
    catch["retry"]["limit"]["attempt"]["count"] = 1
    port = StubPort()
    outcome = await run_workflow(
        parse_definition(document), {}, port, RunLimits(), clock=InstantClock()
    )
    assert_fault(outcome, "communication", 503, "/do/0/resilient/try/0/get")
    assert port.flaky_hits == 2


async def test_s10_raise_with_expression_detail_faults_with_custom_error() -> None:
    assert (await run("s10", {"age": 30})).output == {"eligible": True}
    outcome = await run("s10", {"age": 12})
    assert outcome.fault == {
        "type": "https://light-portal.example/errors/underage",
        "status": 422,
        "title": "Underage",
        "detail": "age 12",
        "instance": "/do/0/checkAge",
    }


async def test_s11_fork_runs_all_branches_with_ordered_output() -> None:
    assert (await run("s11", {"x": 5})).output == {"sides": ["L", "R"], "sum": 15}


async def test_s12_compete_fork_returns_the_first_success_and_cancels_the_loser() -> None:
    assert (await run("s12", {})).output == {"winner": "fast"}


async def test_s13_for_binds_each_and_at_accumulates_and_stops_on_while() -> None:
    outcome = await run("s13", {"colors": ["red", "green", "blue"]})
    assert outcome.output == {"picked": ["red:0", "green:1"]}
    assert (await run("s13", {"colors": []})).output == {"colors": []}


async def test_s14_uncaught_task_timeout_faults_with_timeout() -> None:
    assert_fault(await run("s14a", {}), "timeout", 408, "/do/0/nap")


async def test_s14_caught_task_timeout_runs_catch_do() -> None:
    assert (await run("s14b", {})).output == {"timedOut": True}


async def test_s15_mcp_call_official_form_returns_structured_content() -> None:
    port = StubPort()
    assert (await run("s15", {"a": 2, "b": 3}, port)).output == {"sum": 5}
    assert port.mcp_calls[0].tool == "add"
    assert port.mcp_calls[0].endpoint == "http://127.0.0.1:18080/mcp"


async def test_s15_mcp_tool_error_faults_with_runtime_error() -> None:
    document = yaml.safe_load((FIXTURES / "s15.yaml").read_text())
    document["do"][0]["add"]["with"]["parameters"]["name"] = "fail"
    outcome = await run_workflow(parse_definition(document), {"a": 1, "b": 1}, StubPort())
    assert_fault(outcome, "runtime", 500, "/do/0/add")


async def test_s15_shorthand_stores_the_official_form_and_gives_the_same_result() -> None:
    official, shorthand = load("s15"), load("s15-shorthand")
    assert shorthand.normalized_document() == official.normalized_document()
    assert (await run("s15-shorthand", {"a": 2, "b": 3})).output == {"sum": 5}
