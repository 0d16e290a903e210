"""An ask's assignment: literal ids, or one `${ }` expression computed when the task opens."""

from __future__ import annotations

import pytest
import yaml

from runtime.engine import DefinitionError, parse_definition
from runtime.engine.model import AskSpec
from tests.support.human_tasks import input_ask_yaml

pytestmark = pytest.mark.requirement("issue-22:human-tasks")


def _ask(assignment: str) -> AskSpec:
    document = yaml.safe_load(input_ask_yaml(assignment))
    spec = parse_definition(document).tasks.tasks[0].spec
    assert isinstance(spec, AskSpec)
    return spec


def test_a_computed_assignee_is_kept_as_its_expression_for_the_task_to_evaluate() -> None:
    spec = _ask("userId: ${ workflow.input.reviewer }")
    assert dict(spec.assignment) == {"userId": "${ workflow.input.reviewer }"}


def test_a_computed_assignee_is_compiled_at_publication_and_literals_are_checked_as_before() -> (
    None
):
    cases = {
        # A computed assignee is compiled like any other expression.
        "userId: ${ workflow.input. }": "does not compile",
        # Half a template is neither an id nor an expression the engine evaluates.
        "userId: user-${ workflow.input.reviewer }": "literal non-empty string",
        'userId: ""': "literal non-empty string",
        "userId: " + "u" * 129: "literal non-empty string",
    }
    for assignment, expected in cases.items():
        with pytest.raises(DefinitionError) as refused:
            _ask(assignment)
        assert expected in refused.value.message, assignment


def test_a_prompt_expression_is_compiled_at_publication() -> None:
    text = input_ask_yaml().replace(
        "prompt: Why was the claim late?", 'prompt: ${ "Why " + workflow.input. }'
    )
    with pytest.raises(DefinitionError) as refused:
        parse_definition(yaml.safe_load(text))
    assert "does not compile" in refused.value.message
