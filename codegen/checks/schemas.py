"""Schema checks: keyword subset, Draft 2020-12 and fastjsonschema compilation, bundling."""

from __future__ import annotations

from typing import Any

import fastjsonschema
import jsonschema
import referencing.exceptions

from codegen.bundle import BundleError, Bundler
from codegen.catalog import ERROR_RESULT_DEF, ERROR_RESULT_REF, ToolSpec
from codegen.checks.report import Report
from codegen.contracts import SCHEMAS_FILE, TOOLS_FILE, ContractSet
from codegen.reference import ReferenceValidator, contracts_registry
from codegen.render_validators import draft07_copy
from codegen.schema_walk import walk_schema

ALLOWED_KEYWORDS = frozenset(
    {
        "$schema",
        "$ref",
        "$defs",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "type",
        "enum",
        "const",
        "properties",
        "patternProperties",
        "additionalProperties",
        "required",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
    }
)
CHECK = "schema"


def check_keywords(report: Report, where: str, schema: Any) -> None:
    """Every keyword is in the subset both jsonschema and fastjsonschema implement."""
    for pointer, node in walk_schema(schema):
        for keyword in node:
            if keyword not in ALLOWED_KEYWORDS:
                report.fail(CHECK, f"{where}#{pointer}: keyword {keyword!r} is not supported")
        ref = node.get("$ref")
        if "$ref" in node and len(node) > 1:
            siblings = sorted(key for key in node if key != "$ref")
            report.fail(CHECK, f"{where}#{pointer}: sibling keywords beside $ref: {siblings}")
        if ref is not None and not _is_supported_ref(ref, where):
            report.fail(CHECK, f"{where}#{pointer}: unsupported $ref {ref!r}")
        if isinstance(node.get("items"), list):
            report.fail(CHECK, f"{where}#{pointer}: array-form items is not supported")


def _is_supported_ref(ref: Any, where: str) -> bool:
    if not isinstance(ref, str):
        return False
    if ref.startswith(f"{SCHEMAS_FILE}#/$defs/"):
        return True
    return where.startswith(SCHEMAS_FILE) and ref.startswith("#/$defs/")


def _check_draft_2020_12(report: Report, where: str, schema: Any, registry: Any) -> None:
    try:
        ReferenceValidator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        report.fail(CHECK, f"{where}: not a valid Draft 2020-12 schema: {exc.message}")
        return
    ReferenceValidator(schema, registry=registry)
    # Validation resolves refs lazily, so look every one up now through the same registry.
    base = SCHEMAS_FILE if where.startswith(SCHEMAS_FILE) else ""
    resolver = registry.resolver(base_uri=base)
    for pointer, node in walk_schema(schema):
        ref = node.get("$ref")
        if not isinstance(ref, str) or (base == "" and ref.startswith("#")):
            continue
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable as exc:
            report.fail(CHECK, f"{where}#{pointer}: $ref does not resolve: {exc}")


def _check_fastjsonschema(report: Report, where: str, schema: dict[str, Any]) -> None:
    try:
        fastjsonschema.compile(draft07_copy(schema, "contract_check"), use_formats=False)
    except Exception as exc:  # fastjsonschema raises several unrelated types on bad input
        report.fail(CHECK, f"{where}: fastjsonschema cannot compile it: {exc}")


def check_schemas(report: Report, contracts: ContractSet) -> tuple[list[ToolSpec], Any]:
    """Check every schema; return the tools that bundle cleanly and the error result schema."""
    registry = contracts_registry(contracts)
    shared = contracts.schemas_document.get("$defs")
    if not isinstance(shared, dict):
        report.fail(CHECK, f"{SCHEMAS_FILE}: $defs must be an object")
        shared = {}
    for name, schema in shared.items():
        where = f"{SCHEMAS_FILE}#/$defs/{name}"
        check_keywords(report, where, schema)
    check_keywords(report, SCHEMAS_FILE, {"$schema": contracts.schemas_document.get("$schema")})
    _check_draft_2020_12(report, SCHEMAS_FILE, contracts.schemas_document, registry)
    bundler = Bundler(contracts.documents)
    tools: list[ToolSpec] = []
    for index, entry in enumerate(contracts.tools):
        bundled = _bundle_tool(report, bundler, registry, index, entry)
        if bundled is not None:
            tools.append(bundled)
    error_result: Any = None
    if ERROR_RESULT_DEF not in shared:
        report.fail(CHECK, f"{SCHEMAS_FILE}: $defs/{ERROR_RESULT_DEF} is missing")
    else:
        try:
            error_result = bundler.bundle({"$ref": ERROR_RESULT_REF}, TOOLS_FILE)
            _check_fastjsonschema(report, ERROR_RESULT_REF, error_result)
        except BundleError as exc:
            report.fail(CHECK, f"{ERROR_RESULT_REF}: {exc}")
    return tools, error_result


def _bundle_tool(
    report: Report, bundler: Bundler, registry: Any, index: int, entry: dict[str, Any]
) -> ToolSpec | None:
    name = entry.get("name", f"#{index}")
    bundled: dict[str, Any] = {}
    for key in ("inputSchema", "outputSchema"):
        where = f"{TOOLS_FILE} {name}.{key}"
        schema = entry.get(key)
        if not isinstance(schema, dict):
            report.fail(CHECK, f"{where}: must be a schema object")
            continue
        check_keywords(report, where, schema)
        _check_draft_2020_12(report, where, schema, registry)
        try:
            bundled[key] = bundler.bundle(schema, TOOLS_FILE)
        except BundleError as exc:
            report.fail(CHECK, f"{where}: {exc}")
            continue
        _check_fastjsonschema(report, where, bundled[key])
        if key == "inputSchema" and bundled[key].get("type") != "object":
            report.fail(CHECK, f"{where}: an input schema must have type object")
    if len(bundled) != 2 or not isinstance(entry.get("name"), str):
        return None
    return ToolSpec(index, entry, bundled["inputSchema"], bundled["outputSchema"])
