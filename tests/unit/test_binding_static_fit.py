"""Static fit: maximumTaskAttempts is a per-run budget of dispatches; time fits the deadline."""

from __future__ import annotations

from typing import Any

from runtime.binding_reach import Reach
from runtime.engine import parse_definition
from runtime.engine.check import static_requirements
from runtime.engine.model import WorkflowDefinition
from runtime.publication.bindings.status_rules import (
    ApprovedBasis,
    Candidate,
    carry_over_denied_reason,
)
from runtime.publication.bindings.version_rules import static_fit_problems
from runtime.publication.store.definition_rows import Owner
from tests.support.binding_builders import binding, definition_yaml
from tests.support.service_calls import checked_binding

WF = "0198a3c2-0000-7000-8000-000000000001"
TOOL = "0198a3c2-0000-7000-8000-000000000002"
HEADER = {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"}
BOUNDS = checked_binding(binding(WF, TOOL, definition_yaml())).runtime_bounds


def get(name: str, timeout: str | None = None) -> dict[str, Any]:
    task: dict[str, Any] = {
        "call": "http",
        "with": {"method": "get", "endpoint": f"https://api.example.com/{name}"},
    }
    if timeout is not None:
        task["timeout"] = {"after": timeout}
    return {name: task}


def retrying(name: str, body: list[Any], count: int) -> dict[str, Any]:
    retry = {"delay": {"milliseconds": 10}, "limit": {"attempt": {"count": count}}}
    return {name: {"try": body, "catch": {"retry": retry}}}


def parsed(do: list[Any]) -> WorkflowDefinition:
    return parse_definition({"document": dict(HEADER), "do": do})


def test_twelve_sequential_gets_exceed_a_budget_of_eight_task_attempts() -> None:
    definition = parsed([get(f"g{i}") for i in range(12)])
    assert static_requirements(definition).max_task_attempts == 12
    problems = static_fit_problems(definition, BOUNDS, 30000)
    assert BOUNDS.maximum_task_attempts == 8
    assert any("runtimeBounds.maximumTaskAttempts 8" in problem for problem in problems)
    assert any("12 worst-case dispatch attempts" in problem for problem in problems)


def test_nested_retries_multiply_the_dispatches_of_their_bodies() -> None:
    inner = retrying("inner", [get("a"), get("b")], count=1)  # 2 attempts x 2 calls
    definition = parsed([retrying("outer", [inner, get("c")], count=1)])  # 2 x (4 + 1)
    assert static_requirements(definition).max_task_attempts == 10
    problems = static_fit_problems(definition, BOUNDS, 30000)
    assert any("maximumTaskAttempts" in problem for problem in problems)


def test_fork_branches_and_loops_count_every_dispatch() -> None:
    fork = {"both": {"fork": {"branches": [get("a"), get("b"), get("c")]}}}
    definition = parsed([fork, retrying("r", [get("d")], count=2)])
    assert static_requirements(definition).max_task_attempts == 6


def test_a_version_within_the_attempt_budget_and_deadline_fits() -> None:
    definition = parsed([get(f"g{i}", timeout="PT1S") for i in range(4)] + [get("x")])
    assert static_requirements(definition).max_task_attempts == 5
    assert static_fit_problems(definition, BOUNDS, 30000) == []


def test_declared_timeouts_beyond_the_deadline_are_rejected_naming_total_deadline() -> None:
    calls = [get(f"g{i}", timeout="PT10S") for i in range(2)]
    definition = parsed([retrying("r", calls, count=1)])  # 2 attempts x 20 s + 10 ms delay
    assert static_requirements(definition).worst_case_time_ms == 40010
    problems = static_fit_problems(definition, BOUNDS, 30000)
    assert any("totalDeadlineMs 30000" in problem for problem in problems)
    assert static_fit_problems(parsed(calls), BOUNDS, 30000) == []


def test_carry_over_is_denied_when_the_version_does_not_fit() -> None:
    owner = Owner("owner-1", None)
    problems = static_fit_problems(parsed([get(f"g{i}") for i in range(12)]), BOUNDS, 30000)
    basis = ApprovedBasis(
        binding_id="b",
        wf_def_id=WF,
        approval_digest="sha256:" + "a" * 64,
        owner=owner,
        dependency_keys=frozenset(),
        target_keys=frozenset(),
        write_task_keys=frozenset(),
    )
    candidate = Candidate(
        wf_def_id=WF,
        approval_digest="sha256:" + "a" * 64,
        reach=Reach((), ()),
        write_tasks=(),
        binding_approval="carryOver",
        published_by="owner-1",
        static_fit_problems=problems,
    )
    reason = carry_over_denied_reason(basis, candidate, owner)
    assert reason is not None and "maximumTaskAttempts" in reason
