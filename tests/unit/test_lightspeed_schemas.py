"""contracts/lightspeed-workflow/v2/schemas.json: accepts what the parser accepts, not the rest."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from runtime.lightspeed import ContractError, parse_envelope
from tests.support.lightspeed import (
    changed,
    reference_envelopes,
    requires_vectors,
    tool_invocation_envelope,
    vectors,
)
from tests.support.shared import REPO

SCHEMAS = REPO / "contracts" / "lightspeed-workflow" / "v2" / "schemas.json"


def validator(root: str) -> jsonschema.Draft202012Validator:
    document = json.loads(SCHEMAS.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator({**document, "$ref": f"#/$defs/{root}"})


def test_the_schema_bundle_is_valid_and_names_its_four_roots() -> None:
    document = json.loads(SCHEMAS.read_text(encoding="utf-8"))
    assert document["roots"] == [
        "EmissionEnvelope",
        "WorkflowToolStartArgs",
        "WorkflowToolRecoveryResult",
        "WorkflowToolRecipeV1",
    ]
    assert set(document["roots"]) <= set(document["$defs"])
    validator("EmissionEnvelope")


@pytest.mark.parametrize("envelope", reference_envelopes())
def test_each_reference_envelope_is_valid(envelope: dict[str, Any]) -> None:
    assert list(validator("EmissionEnvelope").iter_errors(envelope)) == []


@requires_vectors
def test_the_reference_start_args_and_recovery_result_are_valid() -> None:
    document = vectors()
    assert validator("WorkflowToolStartArgs").is_valid(document["startArgs"])
    assert validator("WorkflowToolRecoveryResult").is_valid(document["expected"]["recoveryResult"])
    assert validator("WorkflowToolRecipeV1").is_valid(json.loads(document["inputs"]["recipeJson"]))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("body.kind", "future_protocol_shape"),
        ("emission_id", "emission:sha256:" + "0" * 64),
        ("body.invocation.run_id", "7"),
        ("body.invocation.run_id", 2**64),
        ("body.invocation.completion_promises", {}),
        ("body.invocation.completion_promises", {"reply": "p", "x": "q"}),
        ("producer.universe_id", "x"),
        ("body.holder_workflow_id", ...),
        ("producer.log_seq", -1),
    ],
)
def test_the_schema_and_the_parser_refuse_the_same_malformed_envelopes(
    path: str, value: Any
) -> None:
    bad = changed(tool_invocation_envelope(), path, value)
    # The id rule of a tool_invocation (E4: equal to the invocation id) is beyond a schema.
    if path != "emission_id":
        assert not validator("EmissionEnvelope").is_valid(bad)
    with pytest.raises(ContractError):
        parse_envelope(bad)


def test_a_derived_id_of_another_form_is_refused_by_the_schema() -> None:
    envelope = {
        "emission_id": "emission:sha256:ABC",
        "producer": {
            "kind": "workflow",
            "universe_id": tool_invocation_envelope()["producer"]["universe_id"],
            "workflow_id": "w",
        },
        "body": {
            "kind": "source_resolution",
            "promise_id": "p",
            "resolution": {"kind": "cancelled"},
        },
    }
    assert not validator("EmissionEnvelope").is_valid(envelope)
