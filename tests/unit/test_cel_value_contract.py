"""Each CEL-value contract case as a named test of the CEL core and value adapter.

The cases are the project's own (tests/unit/fixtures/vectors/cel-value.json); the shared
reference file, where present, must name the same cases with the same outcomes and values.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from runtime.engine import DefinitionError, ExpressionError, parse_definition
from runtime.engine.cel import MISSING, CelLimits, cel_to_json, evaluate_tree, evaluate_value
from runtime.engine.cel import celpy_seam as shim
from tests.support.shared import OWN_FIXTURES, requires_shared, shared_path

pytestmark = pytest.mark.requirement("001:CEL To JSON Contract")

OWN_CASES = OWN_FIXTURES / "vectors" / "cel-value.json"
SHARED_CASES = "reference/cel-value-v1.json"
CASES = {case["name"]: case for case in json.loads(OWN_CASES.read_text())["cases"]}


def value(text: str, **variables: Any) -> Any:
    return evaluate_value(text, variables)


def rejected(text: str, **variables: Any) -> ExpressionError:
    with pytest.raises(ExpressionError) as caught:
        evaluate_value(text, variables)
    return caught.value


@requires_shared(SHARED_CASES)
def test_the_shared_reference_agrees_with_our_cases() -> None:
    shared = json.loads(shared_path(SHARED_CASES).read_text())
    assert shared["contractVersion"] == 1
    ours = {name: case["outcome"] for name, case in CASES.items()}
    assert {case["name"]: case["outcome"] for case in shared["cases"]} == ours
    for case in shared["cases"]:
        if case["outcome"] in ("accept", "accept-string"):
            assert value(_literal(case)) == case["json"], case


def _literal(case: dict[str, Any]) -> str:
    """The CEL expression that builds the case's value."""
    if case["celType"] in ("timestamp", "duration"):
        return f"{case['celType']}('{case['input']}')"
    return str(case["input"])


def test_our_cases_cover_every_rule_of_the_contract() -> None:
    assert set(CASES) == {
        "safe-integer", "large-integer", "finite-double", "nan", "infinity", "timestamp",
        "duration", "bytes", "null", "missing", "non-string-map-key", "opaque",
        "wrong-root-type", "checker-error", "cost-exhaustion",
    }  # fmt: skip


def test_safe_integer_converts_to_a_json_number() -> None:
    assert value(CASES["safe-integer"]["input"]) == CASES["safe-integer"]["json"]


def test_large_integer_beyond_two_to_the_53_is_rejected() -> None:
    assert rejected(CASES["large-integer"]["input"]).reason == "convert"
    assert value("9007199254740991") == 2**53 - 1


def test_finite_double_is_rejected_in_contract_v1() -> None:
    double = shim.DoubleType(float(CASES["finite-double"]["input"]))
    with pytest.raises(ExpressionError) as caught:
        cel_to_json(double, contract=1)
    assert "v1" in caught.value.message


@pytest.mark.requirement("001:Canonical effective input")
def test_finite_double_converts_to_a_json_number_in_contract_v2() -> None:
    assert value(CASES["finite-double"]["input"]) == float(CASES["finite-double"]["input"])
    assert value("amount * 2.0", amount=100000.25) == 200000.5
    assert value("[0.1, {'x': -2.5}]") == [0.1, {"x": -2.5}]
    assert rejected("1e300").reason == "convert"
    assert rejected("double('NaN')").reason == "convert"


def test_nan_is_rejected() -> None:
    assert rejected("double('NaN')").reason == "convert"


def test_infinity_is_rejected() -> None:
    assert rejected("double('Infinity')").reason == "convert"


def test_timestamp_converts_to_an_rfc3339_string() -> None:
    case = CASES["timestamp"]
    assert value(f"timestamp('{case['input']}')") == case["json"]


def test_duration_converts_to_seconds_string() -> None:
    case = CASES["duration"]
    assert value(f"duration('{case['input']}')") == case["json"]


def test_bytes_convert_to_base64() -> None:
    assert value("b'\\x01\\x02\\x03'") == CASES["bytes"]["json"]


def test_null_converts_to_json_null() -> None:
    assert value("null") is None


def test_missing_value_is_omitted_where_the_site_allows_it() -> None:
    assert evaluate_value("input.absent", {"input": {}}, allow_omit=True) is MISSING


def test_a_value_tree_entry_reading_an_absent_field_is_an_expression_error_not_dropped() -> None:
    # docs/MIGRATING.md: "CEL faults with an expression error"; dsl-profile §1: "A failed
    # evaluation is the expression error". No value-tree site omits an entry in silence.
    for text in ("${ input.maybe + 'x' }", "${ input.maybe }"):
        with pytest.raises(ExpressionError) as caught:
            evaluate_tree({"r": text, "b": 1}, {"input": {}}, CelLimits())
        assert caught.value.reason == "missing"
    guarded = "${ has(input.maybe) ? input.maybe + 'x' : 'none' }"
    assert evaluate_tree({"r": guarded}, {"input": {}}, CelLimits()) == {"r": "none"}


def test_missing_value_is_an_error_where_omission_is_not_allowed() -> None:
    assert rejected("input.absent", input={}).reason == "missing"


def test_non_string_map_key_is_rejected() -> None:
    assert "string" in rejected(CASES["non-string-map-key"]["input"]).message


def test_opaque_value_is_rejected() -> None:
    assert "opaque" in rejected("type(1)").message


def test_wrong_root_type_fails_the_object_output_schema() -> None:
    import asyncio

    from runtime.engine.run import run_workflow
    from tests.support.engine import StubPort

    definition = parse_definition(
        {
            "document": {"dsl": "1.0.3", "namespace": "t", "name": "w", "version": "1.0.0"},
            "output": {"as": "${ 'text' }"},
            "do": [{"a": {"set": {"x": 1}}}],
        }
    )
    outcome = asyncio.run(run_workflow(definition, {}, StubPort()))
    assert outcome.error is not None
    assert outcome.error.code == "WORKFLOW_OUTPUT_INVALID"


def test_checker_error_undeclared_root_is_rejected_at_publication() -> None:
    document = yaml.safe_load(
        """
        document: {dsl: "1.0.3", namespace: t, name: w, version: "1.0.0"}
        input: {schema: {format: json, document: {type: object, properties: {id: {type: string}}}}}
        do:
          - pick: {set: {v: "${ customer.missingField }"}}
        """
    )
    with pytest.raises(DefinitionError) as caught:
        parse_definition(document)
    assert caught.value.task == "/do/0/pick"
    assert caught.value.expression == CASES["checker-error"]["input"]


def test_cost_exhaustion_is_a_deterministic_expression_error() -> None:
    large = list(range(200))
    # `expensive(x)` of the reference is not an allow-listed function; a nested map stands in.
    text = "large.exists(x, large.map(y, y * x).size() < 0)"
    verdicts = set()
    for _ in range(3):
        with pytest.raises(ExpressionError) as caught:
            evaluate_value(text, {"large": large}, CelLimits(max_steps=50_000))
        verdicts.add((caught.value.reason, caught.value.message))
    assert verdicts == {("cost", "evaluation cost exceeded 50000 steps")}
