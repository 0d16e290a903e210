"""validate-contracts: the fixture and real catalogs pass, and each class of defect is caught."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codegen import validate
from codegen.contracts import DEFAULT_CONTRACTS_DIR
from codegen.validate import validate_contracts

FIXTURE = Path(__file__).parents[1] / "unit" / "fixtures" / "catalog"
Edit = Callable[[dict[str, Any]], None]


def _tool(document: dict[str, Any], name: str) -> dict[str, Any]:
    return next(tool for tool in document["tools"] if tool["name"] == name)


def _broken_copy(tmp_path: Path, file_name: str, edit: Edit) -> Path:
    target = tmp_path / "catalog"
    shutil.copytree(FIXTURE, target)
    path = target / file_name
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document, indent=2))
    return target


def _failures(directory: Path) -> list[str]:
    outcome = validate_contracts(directory, require_complete=False)
    return [f"[{check}] {message}" for check, message in outcome.report.failures]


def test_the_fixture_catalog_passes() -> None:
    assert _failures(FIXTURE) == []


def test_the_real_catalog_passes_with_every_tool_present() -> None:
    outcome = validate_contracts(DEFAULT_CONTRACTS_DIR, require_complete=True)
    assert outcome.report.failures == []
    assert outcome.tool_count == 24


def test_the_command_prints_exactly_one_pass_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert validate.main(["--contracts", str(FIXTURE), "--partial"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("PASS catalog contracts: 5 MCP tools, 17 stable errors, ")
    assert lines[0].endswith(" example pairs")


def test_the_command_reports_all_failures_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def edit(document: dict[str, Any]) -> None:
        document["examples"]["unknown_tool"] = document["examples"]["workflow_start"]
        del document["examples"]["workflow_invoke"]["output"]

    broken = _broken_copy(tmp_path, "examples.json", edit)
    assert validate.main(["--contracts", str(broken), "--partial"]) == 1
    out = capsys.readouterr().out
    assert "unknown_tool is not a tool of the catalog" in out
    assert "workflow_invoke: missing the output example" in out
    assert out.splitlines()[-1] == "FAIL catalog contracts: 2 failures"


def test_an_orphan_example_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        document["examples"]["workflow_ghost"] = document["examples"]["workflow_start"]

    failures = _failures(_broken_copy(tmp_path, "examples.json", edit))
    orphan = "[examples] examples.json: workflow_ghost is not a tool of the catalog (orphan)"
    assert failures == [orphan]


def test_a_variant_of_unknown_kind_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        document["examples"]["workflow_start"]["variants"]["withDigest"]["kind"] = "request"

    failures = _failures(_broken_copy(tmp_path, "examples.json", edit))
    assert failures == ["[examples] workflow_start: variant withDigest has no known kind"]


def test_an_unregistered_error_code_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        document["examples"]["workflow_start"]["errorResult"]["error"]["code"] = "WORKFLOW_OOPS"

    failures = _failures(_broken_copy(tmp_path, "examples.json", edit))
    assert "[errors] workflow_start.errorResult: error code 'WORKFLOW_OOPS' is not registered" in (
        failures
    )


def test_a_duplicate_error_code_and_a_missing_meaning_are_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        document["errors"].append(dict(document["errors"][0]))
        del document["errors"][1]["meaning"]

    failures = _failures(_broken_copy(tmp_path, "errors.json", edit))
    assert any("duplicate code WORKFLOW_INPUT_INVALID" in failure for failure in failures)
    assert any("meaning must be a non-empty string" in failure for failure in failures)


def test_an_invalid_example_is_reported_by_both_validators(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        document["examples"]["workflow_binding_list"]["input"]["limit"] = 0

    failures = _failures(_broken_copy(tmp_path, "examples.json", edit))
    assert any("workflow_binding_list.input (input) is invalid at /limit" in f for f in failures)
    assert any("generated validator rejects it" in failure for failure in failures)


def test_an_identity_property_at_a_nested_depth_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        schema = _tool(document, "workflow_start")["inputSchema"]
        schema["properties"]["context"] = {
            "type": "array",
            "items": {"type": "object", "properties": {"meta": {"properties": {"Host_ID": {}}}}},
        }

    failures = _failures(_broken_copy(tmp_path, "workflow-tools-list-full.json", edit))
    assert (
        "[identity] workflow_start: input property /context/[]/meta/Host_ID looks like "
        "caller identity" in failures
    )


def test_an_identity_property_reached_through_a_shared_definition_is_reported(
    tmp_path: Path,
) -> None:
    def edit(document: dict[str, Any]) -> None:
        document["$defs"]["Owner"]["properties"]["roles"] = {"type": "array"}

    failures = _failures(_broken_copy(tmp_path, "schemas.json", edit))
    assert (
        "[identity] workflow_definition_save: input property /owner/roles looks like "
        "caller identity" in failures
    )


def test_host_id_on_workflow_invoke_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        schema = _tool(document, "workflow_invoke")["inputSchema"]
        schema["properties"]["hostId"] = {"$ref": "schemas.json#/$defs/Uuid"}

    failures = _failures(_broken_copy(tmp_path, "workflow-tools-list-full.json", edit))
    assert "[identity] workflow_invoke: input property /hostId looks like caller identity" in (
        failures
    )


def test_a_publication_tool_without_required_host_id_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        _tool(document, "workflow_binding_list")["inputSchema"]["required"].remove("hostId")

    failures = _failures(_broken_copy(tmp_path, "workflow-tools-list-full.json", edit))
    assert "[identity] workflow_binding_list: hostId must be required" in failures


def test_an_operation_id_without_a_uuid_pattern_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        schema = _tool(document, "workflow_definition_publish")["inputSchema"]
        schema["properties"]["operationId"] = {"type": "string", "minLength": 1}

    failures = _failures(_broken_copy(tmp_path, "workflow-tools-list-full.json", edit))
    assert (
        "[identity] workflow_definition_publish: operationId must be a string with a UUID "
        "pattern" in failures
    )
    assert any("jsonschema accepts the probe operationId='not-a-uuid'" in f for f in failures)
    assert any("generated validator accepts the probe operationId=" in f for f in failures)


def test_a_role_filter_wider_than_owner_or_requester_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        schema = _tool(document, "workflow_binding_list")["inputSchema"]
        schema["properties"]["role"]["enum"].append("admin")

    failures = _failures(_broken_copy(tmp_path, "workflow-tools-list-full.json", edit))
    assert "[identity] workflow_binding_list: /role must be an enum of exactly owner|requester" in (
        failures
    )


def test_workflow_start_declaring_stable_tool_ref_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        schema = _tool(document, "workflow_start")["inputSchema"]
        schema["properties"]["stableToolRef"] = {"type": "string"}

    failures = _failures(_broken_copy(tmp_path, "workflow-tools-list-full.json", edit))
    assert "[identity] workflow_start: must not declare stableToolRef" in failures


def test_an_open_input_schema_fails_the_extra_property_probe(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        del _tool(document, "workflow_start")["inputSchema"]["additionalProperties"]

    failures = _failures(_broken_copy(tmp_path, "workflow-tools-list-full.json", edit))
    assert (
        "[probe] workflow_start: jsonschema accepts the probe extra property "
        "unexpectedProbeProperty" in failures
    )


def test_a_loose_digest_pattern_fails_the_malformed_digest_probe(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        document["$defs"]["Digest"]["pattern"] = "^sha256:"

    failures = _failures(_broken_copy(tmp_path, "schemas.json", edit))
    assert any("jsonschema accepts the probe bindingDigest='sha256:xyz'" in f for f in failures)
    assert any("workflow_start: expectedDefinitionDigest must be declared" in f for f in failures)


def test_an_unsupported_keyword_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        schema = _tool(document, "workflow_start")["inputSchema"]
        schema["unevaluatedProperties"] = False

    failures = _failures(_broken_copy(tmp_path, "workflow-tools-list-full.json", edit))
    assert any("keyword 'unevaluatedProperties' is not supported" in f for f in failures)


def test_a_duplicate_tool_name_is_reported(tmp_path: Path) -> None:
    def edit(document: dict[str, Any]) -> None:
        document["tools"].append(document["tools"][0])

    failures = _failures(_broken_copy(tmp_path, "workflow-tools-list-full.json", edit))
    assert "[tools] workflow_definition_save: duplicate tool name" in failures


def test_a_missing_contract_tool_is_reported_when_the_catalog_must_be_complete() -> None:
    outcome = validate_contracts(FIXTURE, require_complete=True)
    messages = [message for _, message in outcome.report.failures]
    assert "workflow_cancel: required tool is missing from the catalog" in messages


def test_a_stale_generated_directory_is_reported(tmp_path: Path) -> None:
    outcome = validate_contracts(FIXTURE, generated_dir=tmp_path, require_complete=False)
    messages = [message for _, message in outcome.report.failures]
    assert f"{tmp_path / 'models.py'} is missing: run make codegen" in messages
