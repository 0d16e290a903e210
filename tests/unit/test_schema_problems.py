"""Listing every input-schema problem: the validator's own first, shape before bounds, capped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fastjsonschema import JsonSchemaValueException

from generated.routes import ROUTES
from runtime.composition.check import check_files
from runtime.mcp.schema_problems import (
    MAX_LISTED,
    SchemaProblem,
    SchemaProblems,
    collect,
    pointer_of,
)
from tests.support.binding_builders import binding, definition_yaml, new_id, publish_args

UUID = "00000000-0000-4000-8000-000000000000"


def _collected(tool: str, arguments: dict[str, Any]) -> SchemaProblems:
    route = ROUTES[tool]
    with pytest.raises(JsonSchemaValueException) as caught:
        route.validate_input(arguments)
    first = SchemaProblem(pointer_of(caught.value.path[1:]), str(caught.value.rule), "first")
    return collect(route, arguments, first)


def test_the_validators_first_failure_leads_even_when_a_shape_problem_follows() -> None:
    arguments = {
        "hostId": "Z" * 36,  # a pattern failure the validator meets first
        "bindingId": UUID,
        "expectedBindingDigest": "sha256:" + "0" * 64,
        "decision": "approve",
        "operationId": 5,  # a type failure it never reaches
    }
    found = _collected("workflow_binding_decide", arguments)
    assert [(p.pointer, p.rule) for p in found.listed] == [
        ("/hostId", "pattern"),
        ("/operationId", "type"),
    ]
    assert found.suffix() == " (and 1 more problems; see details.problems)"


def test_more_schema_errors_than_are_read_are_counted_as_at_least() -> None:
    arguments = {
        "hostId": UUID,
        "operationId": UUID,
        "expectedAggregateVersion": 0,
        "binding": {},
        "dependencies": [],
        "endpointTargets": [{"unknown": 1}] * 300,
    }
    found = _collected("workflow_binding_publish", arguments)
    assert found.capped
    assert len(found.listed) == MAX_LISTED
    assert found.suffix().startswith(" (and at least ")
    # The binding's missing members are shape problems: they lead the endpoint targets' types.
    assert {p.rule for p in found.listed[:5]} == {"required"}


def test_caller_values_and_long_member_names_are_never_echoed_whole() -> None:
    long_name = "n" * 10_000
    arguments = {"hostId": "secret-value", long_name: 1}
    found = _collected("workflow_binding_decide", arguments)
    text = repr(found.listed)
    assert "secret-value" not in text
    assert long_name not in text
    unknown = next(p for p in found.listed if p.rule == "additionalProperties")
    assert unknown.pointer == "/" + "n" * 128 + "..."


def test_pointers_escape_slashes_and_tildes() -> None:
    assert pointer_of(["a/b", "c~d", 0]) == "/a~1b/c~0d/0"
    assert pointer_of([]) == ""


def test_check_binding_lists_every_schema_problem_of_the_payload(tmp_path: Path) -> None:
    text = definition_yaml()
    arguments = publish_args(binding(new_id(), new_id(), text), 0)
    arguments["binding"]["executionClass"] = "urgent"
    arguments["binding"]["resultTextMode"] = "yaml"
    definition = tmp_path / "definition.yaml"
    definition.write_text(text, encoding="utf-8")
    payload = tmp_path / "binding.yaml"
    payload.write_text(yaml.safe_dump(arguments), encoding="utf-8")
    [report] = check_files([definition], binding=payload)
    assert report.binding is not None
    assert [(p["pointer"], p["rule"]) for p in report.binding["problems"]] == [
        ("/binding/executionClass", "enum"),
        ("/binding/resultTextMode", "enum"),
    ]


def test_unique_items_are_compared_whatever_the_member_order() -> None:
    clause = {"claim": "role", "value": "admin"}
    arguments = publish_args(binding(new_id(), new_id(), definition_yaml()), 0)
    arguments["binding"]["callerPolicy"] = {
        "requireAnyOf": [clause, {"value": "admin", "claim": "role"}]
    }
    found = _collected("workflow_binding_publish", arguments)
    assert [(p.pointer, p.rule) for p in found.listed] == [
        ("/binding/callerPolicy/requireAnyOf", "uniqueItems")
    ]
