"""Example coverage, example validation, and the error registry."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from codegen.catalog import ToolSpec
from codegen.checks.report import Report
from codegen.contracts import ContractSet
from codegen.reference import first_error, reference_validator

KINDS = ("input", "output", "errorResult")
CODE_PATTERN = re.compile(r"^[A-Z][A-Z0-9_]*\Z")
GeneratedValidator = Callable[[Any], Any]


def check_error_registry(report: Report, contracts: ContractSet) -> set[str]:
    """Entries have code, retryable and meaning, codes are unique; return the codes."""
    codes: set[str] = set()
    entries = contracts.errors_document.get("errors")
    if not isinstance(entries, list) or not entries:
        report.fail("errors", "errors.json: errors must be a non-empty list")
        return codes
    for index, entry in enumerate(entries):
        where = f"errors.json errors[{index}]"
        if not isinstance(entry, dict):
            report.fail("errors", f"{where}: must be an object")
            continue
        code = entry.get("code")
        if not isinstance(code, str) or not CODE_PATTERN.match(code):
            report.fail("errors", f"{where}: code must be an UPPER_SNAKE string")
            continue
        if code in codes:
            report.fail("errors", f"{where}: duplicate code {code}")
        codes.add(code)
        if not isinstance(entry.get("retryable"), bool):
            report.fail("errors", f"{where} {code}: retryable must be a boolean")
        meaning = entry.get("meaning")
        if not isinstance(meaning, str) or not meaning.strip():
            report.fail("errors", f"{where} {code}: meaning must be a non-empty string")
        extra = sorted(set(entry) - {"code", "retryable", "meaning"})
        if extra:
            report.fail("errors", f"{where} {code}: unexpected keys {extra}")
    return codes


def iter_examples(entry: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """Yield (label, kind, value) for the main examples and the variants of one tool."""
    for kind in KINDS:
        if kind in entry:
            yield kind, kind, entry[kind]
    variants = entry.get("variants", {})
    if isinstance(variants, dict):
        for name, variant in variants.items():
            if isinstance(variant, dict):
                yield f"variants.{name}", str(variant.get("kind")), variant.get("value")


def check_example_coverage(report: Report, contracts: ContractSet) -> None:
    """Every tool has input, output and errorResult; no example names an unknown tool or kind."""
    names = [tool.get("name") for tool in contracts.tools]
    examples = contracts.examples
    if not isinstance(contracts.examples_document.get("examples"), dict):
        report.fail("examples", "examples.json: examples must be an object keyed by tool name")
    for name in names:
        entry = examples.get(str(name))
        if not isinstance(entry, dict):
            report.fail("examples", f"{name}: has no examples")
            continue
        for kind in KINDS:
            if kind not in entry:
                report.fail("examples", f"{name}: missing the {kind} example")
        extra = sorted(set(entry) - {*KINDS, "variants", "$comment"})
        if extra:
            report.fail("examples", f"{name}: unknown example keys {extra}")
        variants = entry.get("variants", {})
        if not isinstance(variants, dict):
            report.fail("examples", f"{name}: variants must be an object")
            continue
        for variant_name, variant in variants.items():
            if not isinstance(variant, dict) or variant.get("kind") not in KINDS:
                report.fail("examples", f"{name}: variant {variant_name} has no known kind")
            elif "value" not in variant:
                report.fail("examples", f"{name}: variant {variant_name} has no value")
    for orphan in sorted(set(examples) - {str(name) for name in names}):
        report.fail("examples", f"examples.json: {orphan} is not a tool of the catalog (orphan)")


def check_examples_validate(
    report: Report,
    contracts: ContractSet,
    tools: list[ToolSpec],
    error_result_schema: Any,
    generated: dict[str, GeneratedValidator] | None,
) -> None:
    """Examples validate with the reference validator and, if given, the generated validators."""
    for tool in tools:
        entry = contracts.examples.get(tool.name)
        if not isinstance(entry, dict):
            continue
        schemas = {
            "input": tool.input_schema,
            "output": tool.output_schema,
            "errorResult": error_result_schema,
        }
        validator_names = {
            "input": f"validate_{tool.name}_input",
            "output": f"validate_{tool.name}_output",
            "errorResult": "validate_workflow_error_result",
        }
        for label, kind, value in iter_examples(entry):
            schema = schemas.get(kind)
            if schema is None:
                continue
            report.example_pairs += 1
            problem = first_error(reference_validator(schema), value)
            if problem is not None:
                report.fail("examples", f"{tool.name}.{label} ({kind}) is invalid {problem}")
            if generated is not None:
                _check_generated(
                    report, generated.get(validator_names[kind]), tool.name, label, value
                )


def _check_generated(
    report: Report, validate: GeneratedValidator | None, tool: str, label: str, value: Any
) -> None:
    if validate is None:
        report.fail("examples", f"{tool}.{label}: no generated validator")
        return
    try:
        validate(value)
    except Exception as exc:  # JsonSchemaValueException from the exec'd generated module
        report.fail("examples", f"{tool}.{label}: generated validator rejects it: {exc}")


def check_error_codes(
    report: Report, contracts: ContractSet, error_result_schema: Any, codes: set[str]
) -> None:
    """Every error code an example or the error result schema names is registered."""
    for tool_name, entry in sorted(contracts.examples.items()):
        if not isinstance(entry, dict):
            continue
        for label, kind, value in iter_examples(entry):
            if kind != "errorResult" or not isinstance(value, dict):
                continue
            error = value.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            if code not in codes:
                report.fail("errors", f"{tool_name}.{label}: error code {code!r} is not registered")
    code_schema = _error_code_schema(error_result_schema)
    for value in code_schema.get("enum", []) + (
        [code_schema["const"]] if "const" in code_schema else []
    ):
        if value not in codes:
            report.fail("errors", f"WorkflowErrorResult error.code allows unregistered {value!r}")


def _error_code_schema(error_result_schema: Any) -> dict[str, Any]:
    try:
        schema = error_result_schema["properties"]["error"]["properties"]["code"]
    except (KeyError, TypeError):
        return {}
    return schema if isinstance(schema, dict) else {}
