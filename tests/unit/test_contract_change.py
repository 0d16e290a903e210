"""Drift's classification of a pinned Tool's contract move: compatible only when provable."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.publication.promotion.contract_change import contract_change

pytestmark = pytest.mark.requirement("001:Publication, Versioning, And Rollback")

CLAIM = {
    "type": "object",
    "required": ["claimId"],
    "properties": {"claimId": {"type": "string", "maxLength": 64}, "kind": {"enum": ["a", "b"]}},
}
SUMMARY = {
    "type": "object",
    "required": ["summary"],
    "properties": {"summary": {"type": "string"}, "score": {"type": "integer"}},
}


def changed(schema: dict[str, Any], **edits: Any) -> dict[str, Any]:
    return {**schema, **edits}


def props(schema: dict[str, Any], **edits: Any) -> dict[str, Any]:
    return {**schema, "properties": {**schema["properties"], **edits}}


SUMMARY_ONLY = changed(SUMMARY, properties={"summary": {"type": "string"}})
NOTE_REQUIRED = changed(props(CLAIM, note={"type": "string"}), required=["claimId", "note"])
KIND_REFUSED = changed(
    CLAIM, properties={"claimId": {"type": "string"}}, additionalProperties=False
)
OPENED = {**props(SUMMARY, extra={}), "additionalProperties": True}


@pytest.mark.parametrize(
    ("name", "current_input", "current_output"),
    [
        ("same contract", CLAIM, SUMMARY),
        ("annotations only", changed(CLAIM, description="claims"), SUMMARY),
        ("input property made optional", changed(CLAIM, required=[]), SUMMARY),
        ("new optional input property", props(CLAIM, note={"type": "string"}), SUMMARY),
        ("input enum grew", props(CLAIM, kind={"enum": ["a", "b", "c"]}), SUMMARY),
        ("input bound raised", props(CLAIM, claimId={"type": "string", "maxLength": 128}), SUMMARY),
        ("new output property", CLAIM, props(SUMMARY, extra={"type": "string"})),
        ("output property newly required", CLAIM, changed(SUMMARY, required=["summary", "score"])),
        ("optional output property dropped", CLAIM, SUMMARY_ONLY),
    ],
)  # fmt: skip
def test_moves_that_keep_every_caller_working_are_compatible(
    name: str, current_input: Any, current_output: Any
) -> None:
    assert contract_change((CLAIM, SUMMARY), (current_input, current_output)) == "compatible", name


@pytest.mark.parametrize(
    ("name", "current_input", "current_output"),
    [
        ("new required input property", NOTE_REQUIRED, SUMMARY),
        ("input type changed", props(CLAIM, claimId={"type": "integer"}), SUMMARY),
        ("input enum shrank", props(CLAIM, kind={"enum": ["a"]}), SUMMARY),
        ("input bound lowered", props(CLAIM, claimId={"type": "string", "maxLength": 8}), SUMMARY),
        ("declared input property refused", KIND_REFUSED, SUMMARY),
        ("promised output field dropped", CLAIM, changed(SUMMARY, required=[])),
        ("output type changed", CLAIM, props(SUMMARY, score={"type": "string"})),
        ("output schema gone", CLAIM, {}),
        ("new output property of a closed object", CLAIM, OPENED),
        ("unprovable keyword moved", changed(CLAIM, anyOf=[{"required": ["kind"]}]), SUMMARY),
    ],
)  # fmt: skip
def test_every_other_move_is_breaking(name: str, current_input: Any, current_output: Any) -> None:
    pinned_output = (
        changed(SUMMARY, additionalProperties=False)
        if name == "new output property of a closed object"
        else SUMMARY
    )
    assert contract_change((CLAIM, pinned_output), (current_input, current_output)) == "breaking", (
        name
    )
