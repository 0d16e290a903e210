"""Refusals of light-workflow-only syntax name it and point at `workflow-mcp convert`."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.engine import parse_definition
from runtime.engine.parse import DefinitionError

pytestmark = pytest.mark.requirement("issue-23:convert")

HEADER = {"dsl": "1.0.3", "namespace": "t", "name": "t", "version": "1.0.0"}


def messages(document: dict[str, Any]) -> list[str]:
    """Every problem publication's parser reports for document."""
    with pytest.raises(DefinitionError) as refused:
        parse_definition(document)
    return [problem.message for problem in refused.value.problems]


@pytest.mark.parametrize(
    ("document", "construct"),
    [
        ({"document": HEADER, "do": [{"a": {"set": {"x": 1}, "end": True}}]}, "`end: true`"),
        ({"document": HEADER, "outputSchemas": {}, "do": [{"a": {"set": {}}}]}, "outputSchemas"),
        ({"document": HEADER, "use": {"mcpSessions": {}}, "do": [{"a": {"set": {}}}]}, "mcpSess"),
        (
            {"document": HEADER, "do": [{"a": {"call": "http", "with": {
                "method": "GET", "endpoint": "http://h/c/${ .id }"}}}]},
            "`${ }` inside text",
        ),
        (
            {"document": HEADER, "input": {"schema": {"format": "json", "document": {
                "type": "object", "properties": {"s": {"type": "string"}},
                "additionalProperties": False}}},
             "do": [{"r": {"switch": [{"p": {"when": ".s == premium", "then": "end"}}]}}]},
            "'premium' in quotes",
        ),
        (
            {"document": HEADER, "do": [{"a": {"ask": {
                "prompt": "ok?", "mode": "confirm", "assignment": {"roleId": "admin"},
                "options": [{"label": "OK", "value": "OK"}]}}}]},
            "`mode: confirm`",
        ),
    ],
)  # fmt: skip
def test_light_workflow_syntax_is_named_with_the_convert_command(
    document: dict[str, Any], construct: str
) -> None:
    found = [text for text in messages(document) if "workflow-mcp convert" in text]
    assert found and construct in found[0], messages(document)


def test_an_ask_mode_with_no_equivalent_is_not_sent_to_convert() -> None:
    document = {"document": HEADER, "do": [{"a": {"ask": {
        "prompt": "ok?", "mode": "form", "assignment": {"roleId": "admin"}}}}]}  # fmt: skip
    assert not [text for text in messages(document) if "workflow-mcp convert" in text]
