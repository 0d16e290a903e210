"""generated/models.py: msgspec.Struct models produced by datamodel-code-generator."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from codegen.catalog import ERROR_RESULT_DEF, BundledCatalog, pascal_case
from codegen.contracts import SCHEMAS_FILE, ContractError, ContractSet
from codegen.schema_walk import LIST_KEYWORDS, MAP_KEYWORDS, SINGLE_KEYWORDS, map_subschemas

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

# Why each option: msgspec output with stable names (titles), snake_case attributes renamed back
# to the wire names with field(name=...), UNSET for optional fields so encoding omits them, and
# Literal types instead of Enum classes so handlers compare plain strings.
DATAMODEL_OPTIONS = (
    "--input-file-type",
    "jsonschema",
    "--output-model-type",
    "msgspec.Struct",
    "--disable-timestamp",
    "--target-python-version",
    "3.11",
    "--use-standard-collections",
    "--use-union-operator",
    "--use-annotated",
    "--field-constraints",
    "--snake-case-field",
    "--use-title-as-name",
    "--enum-field-as-literal",
    "all",
    "--skip-root-model",
    "--formatters",
    "builtin",
)


def input_model_name(tool_name: str) -> str:
    """The class name of a tool's input model (workflow_start -> WorkflowStartInput)."""
    return f"{pascal_case(tool_name)}Input"


def output_model_name(tool_name: str) -> str:
    """The class name of a tool's output model."""
    return f"{pascal_case(tool_name)}Output"


def is_open_object(schema: Any) -> bool:
    """Whether an object schema admits undeclared members (a msgspec Struct would drop them)."""
    if not isinstance(schema, dict) or "$ref" in schema:
        return False
    is_object = schema.get("type") == "object" or "properties" in schema
    return is_object and schema.get("additionalProperties", True) is not False


class _Preparer:
    """Rewrites contract schemas into the input datamodel-code-generator gets.

    Refs point at the combined document's $defs, and open objects become plain maps:
    msgspec Structs cannot keep undeclared members, so those decode to dict[str, Any].
    """

    def __init__(self, shared: dict[str, Any]) -> None:
        self.shared = shared
        self.map_names = {name for name, schema in shared.items() if is_open_object(schema)}

    def prepare(self, node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            local = ref.removeprefix(SCHEMAS_FILE)
            name = local.removeprefix("#/$defs/")
            if name in self.map_names:
                return self.prepare(self.shared[name])
            return {"$ref": local}
        prepared = map_subschemas(node, lambda sub, _pointer: self.prepare(sub))
        if is_open_object(prepared):
            extra = prepared.get("additionalProperties", True)
            prepared = {"type": "object", "additionalProperties": extra}
            if "description" in node:
                prepared["description"] = node["description"]
        return prepared


def _name_nested(schema: Any, title: str) -> None:
    """Give every nested object schema a title derived from its path, so class names are stable."""
    if not isinstance(schema, dict) or "$ref" in schema:
        return
    if "properties" in schema:
        schema["title"] = title
    else:
        schema.pop("title", None)
    for keyword in MAP_KEYWORDS:
        members = schema.get(keyword)
        if isinstance(members, dict) and keyword != "$defs":
            suffix = "" if keyword == "properties" else "Pattern"
            for index, (name, sub) in enumerate(members.items()):
                member = pascal_case(name) if keyword == "properties" else str(index)
                _name_nested(sub, f"{title}{suffix}{member}")
    for keyword in SINGLE_KEYWORDS:
        sub = schema.get(keyword)
        _name_nested(sub, f"{title}{'Item' if keyword == 'items' else pascal_case(keyword)}")
    for keyword in LIST_KEYWORDS:
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for index, sub in enumerate(branches):
                _name_nested(sub, f"{title}{pascal_case(keyword)}{index}")


def _as_model(schema: dict[str, Any], name: str, preparer: _Preparer) -> dict[str, Any]:
    """A tool schema as a named model; a bare $ref becomes a subclass of the referenced model."""
    model: dict[str, Any] = preparer.prepare(copy.deepcopy(schema))
    model.pop("$schema", None)
    if "$ref" in model:
        model = {"allOf": [model]}
    _name_nested(model, name)
    return model


def models_schema(contracts: ContractSet, catalog: BundledCatalog) -> dict[str, Any]:
    """The one JSON Schema document datamodel-code-generator turns into models.py."""
    shared = contracts.schemas_document.get("$defs")
    preparer = _Preparer(shared if isinstance(shared, dict) else {})
    definitions: dict[str, Any] = {}
    for name, schema in sorted(preparer.shared.items()):
        if name in preparer.map_names:
            continue  # inlined as a map wherever it is used
        definition = preparer.prepare(copy.deepcopy(schema))
        _name_nested(definition, name)
        definitions[name] = definition
    if ERROR_RESULT_DEF not in definitions:
        raise ContractError(f"{SCHEMAS_FILE} has no $defs/{ERROR_RESULT_DEF}")
    for tool in catalog.tools:
        for name, schema in (
            (input_model_name(tool.name), tool.entry["inputSchema"]),
            (output_model_name(tool.name), tool.entry["outputSchema"]),
        ):
            if name in definitions:
                raise ContractError(f"model name {name} of {tool.name} collides with a $def")
            definitions[name] = _as_model(schema, name, preparer)
    return {"$schema": DRAFT_2020_12, "$defs": definitions}


def render_models(contracts: ContractSet, catalog: BundledCatalog, header: str) -> str:
    """Run datamodel-code-generator on the combined schema and return the module text."""
    document = models_schema(contracts, catalog)
    with tempfile.TemporaryDirectory(prefix="codegen-models-") as scratch:
        source = Path(scratch) / "contracts.json"
        target = Path(scratch) / "models.py"
        # Key order is kept: it fixes the field order of the generated classes.
        source.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "datamodel_code_generator",
                "--input",
                str(source),
                "--output",
                str(target),
                "--custom-file-header",
                header.rstrip("\n"),
                *DATAMODEL_OPTIONS,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode != 0:
            raise ContractError(f"datamodel-codegen failed: {completed.stderr.strip()}")
        return target.read_text(encoding="utf-8")
