"""Bundling: every $ref is inlined, and what cannot be inlined is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from codegen.bundle import BundleError, Bundler
from codegen.catalog import bundle_catalog, declared_error_schema
from codegen.contracts import SCHEMAS_FILE, TOOLS_FILE, load_contracts

FIXTURE = Path(__file__).parent / "fixtures" / "catalog"


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []


def test_bundled_fixture_schemas_contain_no_ref_and_no_defs() -> None:
    catalog = bundle_catalog(load_contracts(FIXTURE))
    for tool in catalog.tools:
        assert _refs(tool.input_schema) == []
        assert _refs(tool.output_schema) == []
        assert "$defs" not in json.dumps(tool.input_schema)
    assert _refs(catalog.error_result_schema) == []


def test_a_ref_into_schemas_json_is_replaced_by_the_definition() -> None:
    catalog = bundle_catalog(load_contracts(FIXTURE))
    save = next(tool for tool in catalog.tools if tool.name == "workflow_definition_save")
    host_id = save.input_schema["properties"]["hostId"]
    assert host_id["type"] == "string"
    assert host_id["pattern"].startswith("^[0-9a-f]{8}-")


def test_nested_refs_inside_schemas_json_are_inlined_too() -> None:
    catalog = bundle_catalog(load_contracts(FIXTURE))
    error = catalog.error_result_schema["properties"]["workflowInstanceId"]
    assert error["pattern"].startswith("^[0-9a-f]{8}-")


def test_a_recursive_ref_is_refused() -> None:
    node = {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
    schemas = {"$defs": {"Node": node}}
    bundler = Bundler({SCHEMAS_FILE: schemas, TOOLS_FILE: {}})
    with pytest.raises(BundleError, match="recursive"):
        bundler.bundle({"$ref": f"{SCHEMAS_FILE}#/$defs/Node"}, TOOLS_FILE)


def test_an_indirect_recursion_through_two_definitions_is_refused() -> None:
    schemas = {
        "$defs": {
            "A": {"type": "array", "items": {"$ref": "#/$defs/B"}},
            "B": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/A"}]},
        }
    }
    bundler = Bundler({SCHEMAS_FILE: schemas, TOOLS_FILE: {}})
    with pytest.raises(BundleError, match="recursive"):
        bundler.bundle({"$ref": f"{SCHEMAS_FILE}#/$defs/A"}, TOOLS_FILE)


def test_the_same_definition_used_twice_side_by_side_is_not_recursion() -> None:
    schemas = {"$defs": {"Id": {"type": "string"}}}
    bundler = Bundler({SCHEMAS_FILE: schemas, TOOLS_FILE: {}})
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": f"{SCHEMAS_FILE}#/$defs/Id"},
            "b": {"$ref": f"{SCHEMAS_FILE}#/$defs/Id"},
        },
    }
    bundled = bundler.bundle(schema, TOOLS_FILE)
    assert bundled["properties"] == {"a": {"type": "string"}, "b": {"type": "string"}}


def test_sibling_keywords_beside_a_ref_are_refused() -> None:
    bundler = Bundler({SCHEMAS_FILE: {"$defs": {"Id": {"type": "string"}}}, TOOLS_FILE: {}})
    with pytest.raises(BundleError, match="sibling"):
        bundler.bundle({"$ref": f"{SCHEMAS_FILE}#/$defs/Id", "maxLength": 3}, TOOLS_FILE)


def test_a_ref_to_a_missing_definition_is_refused() -> None:
    bundler = Bundler({SCHEMAS_FILE: {"$defs": {}}, TOOLS_FILE: {}})
    with pytest.raises(BundleError, match="does not resolve"):
        bundler.bundle({"$ref": f"{SCHEMAS_FILE}#/$defs/Missing"}, TOOLS_FILE)


def test_a_property_named_ref_is_data_not_a_reference() -> None:
    bundler = Bundler({SCHEMAS_FILE: {"$defs": {}}, TOOLS_FILE: {}})
    schema = {"type": "object", "properties": {"$ref": {"type": "string"}}}
    assert bundler.bundle(schema, TOOLS_FILE) == schema


CONTRACTS = Path(__file__).parents[2] / "contracts" / "workflow-admin"


def _real_catalog() -> Any:
    return bundle_catalog(load_contracts(CONTRACTS))


def test_every_tool_declares_the_envelope_frame_not_each_codes_details() -> None:
    # The full envelope repeated in 23 outputSchemas was half of tools/list's bytes.
    catalog = _real_catalog()
    declared = declared_error_schema(catalog.error_result_schema)
    assert declared["properties"]["error"]["properties"]["details"] == {
        "type": "object",
        "additionalProperties": True,
    }
    assert len(json.dumps(declared)) * 3 < len(json.dumps(catalog.error_result_schema))
    served = json.loads(
        (Path(__file__).parents[2] / "generated" / "catalog.json").read_text(encoding="utf-8")
    )
    for tool in served["tools"]:
        assert tool["outputSchema"]["anyOf"][-1] == declared, tool["name"]


def test_the_declared_envelope_admits_every_envelope_the_contract_admits() -> None:
    catalog = _real_catalog()
    full = jsonschema.Draft202012Validator(catalog.error_result_schema)
    declared = jsonschema.Draft202012Validator(declared_error_schema(catalog.error_result_schema))
    examples = json.loads((CONTRACTS / "examples.json").read_text(encoding="utf-8"))
    envelopes = [node for node in _objects(examples) if full.is_valid(node) and "error" in node]
    assert envelopes
    for envelope in envelopes:
        assert declared.is_valid(envelope), envelope
    assert not declared.is_valid({"status": "failed", "error": {"code": "WORKFLOW_TASK_FAILED"}})


def _objects(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [node] + [found for value in node.values() for found in _objects(value)]
    if isinstance(node, list):
        return [found for item in node for found in _objects(item)]
    return []
