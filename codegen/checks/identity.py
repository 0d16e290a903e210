"""The identity guard and the per-tool host, operation and digest rules."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from codegen.catalog import ToolSpec
from codegen.checks.names import (
    DIGEST_PATTERN,
    HOST_ASSERTING_TOOLS,
    IDENTITY_EXCEPTIONS,
    IDENTITY_SPELLINGS,
    NOT_UUIDS,
    OPERATION_TOOLS,
    UUID_EXAMPLE,
    is_identity_name,
)
from codegen.checks.report import Report
from codegen.reference import ecma_regex, is_valid
from codegen.schema_walk import escape_pointer_token, walk_schema

CHECK = "identity"
_PASS_THROUGH = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else")
_ELEMENT = ("items", "additionalProperties", "contains", "unevaluatedItems", "prefixItems")


def iter_property_names(schema: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Yield (path, name) for every property name a schema declares or requires, any depth."""
    if not isinstance(schema, dict):
        return
    properties = schema.get("properties")
    declared = properties if isinstance(properties, dict) else {}
    for name, sub in declared.items():
        child = f"{path}/{escape_pointer_token(name)}"
        yield child, name
        yield from iter_property_names(sub, child)
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if isinstance(name, str) and name not in declared:
            yield f"{path}/{escape_pointer_token(name)}", name
    patterns = schema.get("patternProperties")
    for pattern, sub in (patterns if isinstance(patterns, dict) else {}).items():
        yield from iter_property_names(sub, f"{path}/~pattern({pattern})")
    for keyword in _PASS_THROUGH + _ELEMENT:
        value = schema.get(keyword)
        nested = f"{path}/[]" if keyword in _ELEMENT else path
        for sub in value if isinstance(value, list) else [value]:
            yield from iter_property_names(sub, nested)
    definitions = schema.get("$defs")
    for sub in definitions.values() if isinstance(definitions, dict) else []:
        yield from iter_property_names(sub, f"{path}/$defs")


def _iter_patterns(schema: Any) -> Iterator[str]:
    for _pointer, node in walk_schema(schema):
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict):
            yield from patterns


def check_identity_guard(report: Report, tool: ToolSpec) -> None:
    """No identity-looking input property at any depth, except the tool's exact exceptions."""
    allowed = IDENTITY_EXCEPTIONS.get(tool.name, frozenset())
    seen: set[str] = set()
    for path, name in iter_property_names(tool.input_schema):
        if is_identity_name(name) and path not in allowed and path not in seen:
            seen.add(path)
            report.fail(CHECK, f"{tool.name}: input property {path} looks like caller identity")
    for pattern in sorted(set(_iter_patterns(tool.input_schema))):
        admitted = [name for name in IDENTITY_SPELLINGS if ecma_regex(pattern).search(name)]
        if admitted:
            report.fail(CHECK, f"{tool.name}: patternProperties {pattern!r} admits {admitted}")
    properties = tool.input_schema.get("properties", {})
    if "/owner" in allowed and "owner" in properties:
        owner = properties["owner"]
        if owner.get("type") != "object" or owner.get("additionalProperties") is not False:
            report.fail(CHECK, f"{tool.name}: /owner must be a closed object schema")
    if "/role" in allowed:
        role = properties.get("role", {})
        if sorted(map(str, role.get("enum", []))) != ["owner", "requester"]:
            report.fail(CHECK, f"{tool.name}: /role must be an enum of exactly owner|requester")


def _is_uuid_schema(schema: Any) -> bool:
    if not isinstance(schema, dict) or not isinstance(schema.get("pattern"), str):
        return False
    accepts = is_valid(schema, UUID_EXAMPLE)
    return accepts and not any(is_valid(schema, value) for value in NOT_UUIDS)


def _check_required_uuid(report: Report, tool: ToolSpec, field: str) -> None:
    schema = tool.input_schema
    if field not in schema.get("required", []):
        report.fail(CHECK, f"{tool.name}: {field} must be required")
    if not _is_uuid_schema(schema.get("properties", {}).get(field)):
        report.fail(CHECK, f"{tool.name}: {field} must be a string with a UUID pattern")


def check_tool_rules(report: Report, tool: ToolSpec) -> None:
    """hostId and operationId on publication tools; invoke and start specifics."""
    entry, properties = tool.entry, tool.input_schema.get("properties", {})
    if tool.name in HOST_ASSERTING_TOOLS:
        _check_required_uuid(report, tool, "hostId")
        if entry.get("identitySource") != "publisherAssertion":
            report.fail(CHECK, f"{tool.name}: identitySource must be publisherAssertion")
        if entry.get("publisherToken") is not True:
            report.fail(CHECK, f"{tool.name}: publisherToken must be true")
    elif entry.get("publisherToken"):
        report.fail(CHECK, f"{tool.name}: publisherToken is only for the publication tools")
    if tool.name in OPERATION_TOOLS:
        _check_required_uuid(report, tool, "operationId")
    if tool.name == "workflow_invoke":
        if entry.get("gatewayPublication") is not False:
            report.fail(CHECK, "workflow_invoke: gatewayPublication must be false")
        if entry.get("identitySource") != "trustedInvocationContext":
            report.fail(CHECK, "workflow_invoke: identitySource must be trustedInvocationContext")
    if tool.name == "workflow_start":
        digest = properties.get("expectedDefinitionDigest")
        if not isinstance(digest, dict) or digest.get("pattern") != DIGEST_PATTERN:
            report.fail(
                CHECK,
                f"workflow_start: expectedDefinitionDigest must be declared with {DIGEST_PATTERN}",
            )
        if "expectedDefinitionDigest" in tool.input_schema.get("required", []):
            report.fail(CHECK, "workflow_start: expectedDefinitionDigest must be optional")
        if any(name == "stableToolRef" for _, name in iter_property_names(tool.input_schema)):
            report.fail(CHECK, "workflow_start: must not declare stableToolRef")
