"""Known-answer fixtures of the feature ledger's wire shapes (contracts/fixtures/
development-workflow-v1/, shaped like the public upstream fixtures; issue 36)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codegen.contracts import DEFAULT_CONTRACTS_DIR, SCHEMAS_FILE, load_contracts
from codegen.reference import contracts_registry, reference_validator
from runtime.features.findings import finding_id
from runtime.features.wire import MalformedResult, parse_stage_result

FIXTURES = Path(__file__).resolve().parents[2] / "contracts/fixtures/development-workflow-v1"
# The members of the upstream fixtures (networknt/light-fabric fc50b4f) we share.
UPSTREAM_REVIEW = {"binding", "accepted", "evidence", "existingFindings", "newFindings"}
UPSTREAM_REMEDIATION = {"turnId", "candidate", "findingId", "changedPaths", "evidence", "dispute"}
UPSTREAM_FINDING = {
    "localId", "repository", "location", "failure", "resolution", "evidence", "severity",
    "duplicateOf", "duplicateReason",
}  # fmt: skip


def _fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def _validator(definition: str) -> Any:
    registry = contracts_registry(load_contracts(DEFAULT_CONTRACTS_DIR))
    return reference_validator({"$ref": f"{SCHEMAS_FILE}#/$defs/{definition}"}, registry)


@pytest.mark.requirement("004:F13")
@pytest.mark.parametrize(
    ("name", "definition"),
    [
        ("feature-run.json", "FeatureRun"),
        ("stage-claim.json", "StageClaim"),
        ("review-result.json", "ReviewResult"),
        ("remediation.json", "Remediation"),
    ],
)
def test_each_fixture_is_valid_under_its_contract(name: str, definition: str) -> None:
    errors = [e.message for e in _validator(definition).iter_errors(_fixture(name))]
    assert errors == []


@pytest.mark.requirement("004:F13")
def test_the_worker_facing_shapes_carry_exactly_the_upstream_members() -> None:
    review = _fixture("review-result.json")
    assert set(review) == UPSTREAM_REVIEW
    assert set(review["newFindings"][0]) == UPSTREAM_FINDING
    assert set(_fixture("remediation.json")) == UPSTREAM_REMEDIATION


@pytest.mark.requirement("004:F13")
def test_an_unknown_member_is_refused_by_the_contract_and_at_acceptance() -> None:
    invalid = _fixture("invalid-review-result-unknown-field.json")
    assert not _validator("ReviewResult").is_valid(invalid)
    result = {
        "schemaVersion": 1,
        "featureRunId": invalid["binding"]["featureRunId"],
        "stageExecutionId": invalid["binding"]["stageExecutionId"],
        "stage": {"kind": "design", "phaseId": None},
        "inputs": {},
        "artifact": invalid["evidence"],
        "reviews": [invalid],
        "remediations": [_fixture("remediation.json")],
    }
    with pytest.raises(MalformedResult, match="/reviews/0/verdict"):
        parse_stage_result(result)
    result["reviews"] = [_fixture("review-result.json")]
    assert parse_stage_result(result)["reviews"] == [_fixture("review-result.json")]


@pytest.mark.requirement("004:F14")
def test_canonical_finding_ids_match_the_known_answers() -> None:
    vectors = _fixture("finding-ids.json")["vectors"]
    assert [finding_id(v["featureRunId"], v["reviewId"], v["localId"]) for v in vectors] == [
        v["findingId"] for v in vectors
    ]
