"""Definition size limits are checked on the text before parsing, naming the limit."""

from __future__ import annotations

import pytest

from runtime.errors import WorkflowError
from runtime.publication.definition_limits import DefinitionLimits, check_definition_size

HEADER = 'document: {dsl: "1.0.3", namespace: t, name: w, version: "1.0.0"}\n'


def tasks_text(count: int) -> str:
    tasks = "".join(f"  - t{i}:\n      set:\n        x: 1\n" for i in range(count))
    return HEADER + "do:\n" + tasks


def refusal(text: str, limits: DefinitionLimits) -> WorkflowError:
    with pytest.raises(WorkflowError) as caught:
        check_definition_size(text, limits)
    assert caught.value.code.value == "WORKFLOW_INPUT_INVALID"
    return caught.value


def test_a_20000_task_definition_is_refused_by_the_task_limit() -> None:
    error = refusal(tasks_text(20_000), DefinitionLimits(max_definition_bytes=10_000_000))
    assert error.details == {"limit": "publication.limits.max_tasks"}
    assert "publication.limits.max_tasks (1000)" in error.message


def test_the_byte_limit_is_checked_first() -> None:
    error = refusal(tasks_text(20_000), DefinitionLimits())
    assert error.details == {"limit": "publication.limits.max_definition_bytes"}


def test_nested_task_lists_count_every_task() -> None:
    text = HEADER + (
        "do:\n"
        "  - a:\n"
        '      for: {each: x, in: "${ y }"}\n'
        "      do:\n"
        "        - b: {set: {z: [1, 2]}}\n"
        "        - c: {try: [{d: {set: {}}}], catch: {do: [{e: {set: {}}}]}}\n"
    )
    check_definition_size(text, DefinitionLimits(max_tasks=5))
    assert refusal(text, DefinitionLimits(max_tasks=4)).details == {
        "limit": "publication.limits.max_tasks"
    }


def test_deep_nesting_is_refused_by_the_nesting_limit() -> None:
    text = HEADER + "do:\n  - a:\n      set:\n        x: " + "[" * 40 + "]" * 40 + "\n"
    assert refusal(text, DefinitionLimits(max_nesting=16)).details == {
        "limit": "publication.limits.max_nesting"
    }


def test_text_that_is_not_yaml_is_left_to_the_loader() -> None:
    check_definition_size("do: [unclosed\n", DefinitionLimits())


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_tasks"):
        DefinitionLimits(max_tasks=0)
