"""jsonschema (the reference) and the generated fastjsonschema validators agree on every input."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation.jsonschema.builder import build as schemathesis_strategy

from codegen.catalog import ToolSpec, bundle_catalog
from codegen.checks.examples import iter_examples
from codegen.checks.generated import rendered_validators
from codegen.contracts import DEFAULT_CONTRACTS_DIR, load_contracts
from codegen.generate import render_all
from codegen.reference import ReferenceValidator

CONTRACTS = load_contracts(DEFAULT_CONTRACTS_DIR)
TOOLS = {tool.name: tool for tool in bundle_catalog(CONTRACTS).tools}
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
OTHER_TYPE: dict[type, Any] = {str: 12345, int: "12345", float: "1.5", bool: "true", list: {}}


@pytest.fixture(scope="module")
def generated() -> dict[str, Callable[[Any], Any]]:
    return rendered_validators(render_all(DEFAULT_CONTRACTS_DIR)["validators.py"])


def _example_inputs(tool: ToolSpec) -> list[dict[str, Any]]:
    entry = CONTRACTS.examples.get(tool.name, {})
    return [value for _, kind, value in iter_examples(entry) if kind == "input"]


def _mutations(tool: ToolSpec, instance: Any) -> st.SearchStrategy[Any]:
    """The instance unchanged, or with a required key dropped, a key added, or a type changed."""
    if not isinstance(instance, dict):
        return st.just(instance)
    options: list[Any] = [instance, {**instance, "unexpectedKey": "x"}]
    for key in tool.input_schema.get("required", []):
        options.append({k: v for k, v in instance.items() if k != key})
    for key, value in instance.items():
        options.append({**instance, key: OTHER_TYPE.get(type(value), "changed")})
    return st.sampled_from(options)


def _is_scalar(schema: Any) -> bool:
    scalar_types = ("string", "integer", "number", "boolean")
    return isinstance(schema, dict) and schema.get("type") in scalar_types


def _with_generated_field(tool: ToolSpec, base: dict[str, Any]) -> st.SearchStrategy[Any]:
    """The example with one scalar property replaced by a value generated from its schema."""
    properties = tool.input_schema.get("properties", {})
    scalars = sorted(name for name, schema in properties.items() if _is_scalar(schema))
    if not scalars:
        return st.just(base)
    return st.sampled_from(scalars).flatmap(
        lambda name: from_schema(properties[name]).map(lambda value: {**base, name: value})
    )


def _instances(tool: ToolSpec, schema_strategy: bool) -> st.SearchStrategy[Any]:
    examples: st.SearchStrategy[Any] = st.sampled_from(_example_inputs(tool))
    bases = st.one_of(examples, examples.flatmap(lambda base: _with_generated_field(tool, base)))
    if schema_strategy:
        bases = st.one_of(bases, from_schema(tool.input_schema))
    return bases.flatmap(lambda base: _mutations(tool, base))


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values a schema admits, from schemathesis' JSON Schema engine.

    Draft 7 rules: the contracts use only the keyword subset both validators share, where the
    drafts agree, and the engine's 2020-12 path overflows on our ±(2^53-1) integer bounds.
    """
    return schemathesis_strategy(schema, draft=7, formats={})


def _generated_accepts(validate: Callable[[Any], Any], instance: Any) -> bool:
    try:
        validate(copy.deepcopy(instance))
    except Exception:  # the generated module's JsonSchemaValueException
        return False
    return True


def _run(tool: ToolSpec, validate: Callable[[Any], Any], schema_strategy: bool) -> None:
    reference = ReferenceValidator(tool.input_schema)

    @SETTINGS
    @given(_instances(tool, schema_strategy))
    def agree(instance: Any) -> None:
        expected = bool(reference.is_valid(instance))
        assert _generated_accepts(validate, instance) is expected, instance

    agree()


@pytest.mark.parametrize("tool_name", sorted(TOOLS))
def test_both_validators_agree_on_generated_and_mutated_inputs(
    tool_name: str, generated: dict[str, Callable[[Any], Any]]
) -> None:
    tool = TOOLS[tool_name]
    validate = generated[f"validate_{tool_name}_input"]
    assert _example_inputs(tool), "every tool has an input example to mutate"
    _run(tool, validate, schema_strategy=True)


def _examples_of_kind(tool: ToolSpec, kind: str) -> list[Any]:
    entry = CONTRACTS.examples.get(tool.name, {})
    return [value for _, example_kind, value in iter_examples(entry) if example_kind == kind]


def _schema_mutations(schema: dict[str, Any], instance: Any) -> st.SearchStrategy[Any]:
    """An instance unchanged, or with a required key dropped, a key added, or a type changed."""
    if not isinstance(instance, dict):
        return st.just(instance)
    options: list[Any] = [instance, {**instance, "unexpectedKey": "x"}]
    options += [
        {k: v for k, v in instance.items() if k != key} for key in schema.get("required", [])
    ]
    options += [{**instance, k: OTHER_TYPE.get(type(v), "changed")} for k, v in instance.items()]
    return st.sampled_from(options)


def _agree_on(schema: dict[str, Any], validate: Callable[[Any], Any], examples: list[Any]) -> None:
    reference = ReferenceValidator(schema)
    bases = st.one_of(st.sampled_from(examples), from_schema(schema))

    @SETTINGS
    @given(bases.flatmap(lambda base: _schema_mutations(schema, base)))
    def agree(instance: Any) -> None:
        assert _generated_accepts(validate, instance) is bool(reference.is_valid(instance))

    agree()


@pytest.mark.parametrize("tool_name", sorted(TOOLS))
def test_both_validators_agree_on_generated_and_mutated_outputs(
    tool_name: str, generated: dict[str, Callable[[Any], Any]]
) -> None:
    tool = TOOLS[tool_name]
    examples = _examples_of_kind(tool, "output")
    assert examples, "every tool has an output example to mutate"
    _agree_on(tool.output_schema, generated[f"validate_{tool_name}_output"], examples)


def test_both_validators_agree_on_error_results(
    generated: dict[str, Callable[[Any], Any]],
) -> None:
    examples = [
        value for tool in TOOLS.values() for value in _examples_of_kind(tool, "errorResult")
    ]
    schema = bundle_catalog(CONTRACTS).error_result_schema
    _agree_on(schema, generated["validate_workflow_error_result"], examples)
