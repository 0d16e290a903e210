"""Schema patterns run on RE2: linear time on caller input, unsupported patterns refused early."""

from __future__ import annotations

import pytest

from runtime.canonical.patterns import PatternError, check_schema_patterns, re2_validator
from runtime.engine import DefinitionError, parse_definition
from runtime.errors import WorkflowError
from runtime.invocation.rules import check_input

REDOS = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}}
# 2**40 backtracking paths for Python's re; RE2 answers in one pass.
EVIL_INPUT = {"name": "a" * 40 + "!"}


@pytest.mark.timeout(60)
def test_a_catastrophic_pattern_answers_on_a_long_input() -> None:
    errors = list(re2_validator(REDOS).iter_errors(EVIL_INPUT))
    assert [error.validator for error in errors] == ["pattern"]
    assert not list(re2_validator(REDOS).iter_errors({"name": "a" * 40}))


@pytest.mark.timeout(60)
def test_the_tool_input_check_refuses_the_input_without_backtracking() -> None:
    with pytest.raises(WorkflowError) as caught:
        check_input(EVIL_INPUT, REDOS, None)
    assert caught.value.code.value == "WORKFLOW_INPUT_INVALID"
    assert caught.value.details == {"validation": {"path": "$.name", "rule": "pattern"}}


@pytest.mark.timeout(60)
def test_pattern_properties_and_additional_properties_run_on_re2() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    errors = list(re2_validator(schema).iter_errors({"a" * 40 + "!": 1}))
    assert [error.validator for error in errors] == ["additionalProperties"]
    assert next(iter(re2_validator(schema).iter_errors({"aaa": "x"}))).validator == "type"


def test_a_pattern_re2_cannot_compile_is_named_by_its_place_in_the_schema() -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "(a)\\1"}}}
    with pytest.raises(PatternError) as caught:
        check_schema_patterns(schema)
    assert caught.value.where == "/properties/code/pattern"


def test_a_property_named_pattern_is_not_taken_for_the_keyword() -> None:
    schema = {"type": "object", "properties": {"pattern": {"type": "string"}}, "enum": ["(?=x)"]}
    check_schema_patterns(schema)


def test_an_invalid_schema_regex_at_invocation_is_input_invalid_and_not_retryable() -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "(?=x)"}}}
    with pytest.raises(WorkflowError) as caught:
        check_input({"code": "x"}, schema, None)
    assert caught.value.code.value == "WORKFLOW_INPUT_INVALID"
    assert caught.value.retryable is False
    assert "/properties/code/pattern" in caught.value.message


def test_a_definition_whose_schema_pattern_re2_cannot_compile_is_refused() -> None:
    document = {
        "document": {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"},
        "input": {
            "schema": {
                "format": "json",
                "document": {"type": "object", "properties": {"k": {"pattern": "(a)\\1"}}},
            }
        },
        "do": [{"a": {"set": {"x": 1}}}],
    }
    with pytest.raises(DefinitionError) as caught:
        parse_definition(document)
    assert "/properties/k/pattern" in str(caught.value)
