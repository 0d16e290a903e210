"""generated/validators.py: fastjsonschema validators compiled to code at generation time."""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any

import fastjsonschema

from codegen.schema_walk import map_subschemas

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
ANNOTATIONS = (
    "title",
    "description",
    "$comment",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
)


class ValidatorCodeError(Exception):
    """fastjsonschema produced code this generator cannot merge into one module."""


def validator_function_name(schema_id: str) -> str:
    """The function name fastjsonschema gives a schema whose $id is schema_id."""
    return f"validate_{schema_id}"


def _without_annotations(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    stripped = map_subschemas(schema, lambda sub, _pointer: _without_annotations(sub))
    for keyword in ANNOTATIONS:
        stripped.pop(keyword, None)
    return stripped


def draft07_copy(schema: dict[str, Any], schema_id: str) -> dict[str, Any]:
    """The schema as fastjsonschema compiles it: draft-07 handling, $id naming the function."""
    # Annotations do not validate; fastjsonschema would copy them into every error it raises.
    compiled: dict[str, Any] = copy.deepcopy(_without_annotations(schema))
    compiled["$schema"] = DRAFT_07
    compiled["$id"] = schema_id
    return compiled


def compile_validator_code(schema: dict[str, Any], schema_id: str) -> str:
    """fastjsonschema's module code for one bundled schema (formats are annotations only)."""
    # Formats stay annotations: jsonschema does not assert them by default, and the two
    # validators must agree. UUIDs and digests are constrained with pattern instead.
    return str(fastjsonschema.compile_to_code(draft07_copy(schema, schema_id), use_formats=False))


@dataclass
class ValidatorModule:
    """Merges several fastjsonschema modules into one: shared imports and regex table."""

    imports: set[str] = field(default_factory=set)
    patterns: dict[str, str] = field(default_factory=dict)
    functions: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def add(self, schema: dict[str, Any], schema_id: str) -> str:
        """Compile one schema into the module and return its function name."""
        code = compile_validator_code(schema, schema_id)
        name = validator_function_name(schema_id)
        if name in self.names:
            raise ValidatorCodeError(f"two validators are named {name}")
        tree = ast.parse(code)
        seen_function = False
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports.add(ast.unparse(node))
            elif isinstance(node, ast.FunctionDef):
                seen_function = seen_function or node.name == name
                self.functions.append(_segment(code, node))
            elif isinstance(node, ast.Assign):
                self._add_assignment(code, node)
            else:
                raise ValidatorCodeError(f"unexpected statement in {name}: {ast.dump(node)[:80]}")
        if not seen_function:
            raise ValidatorCodeError(f"fastjsonschema did not produce {name}")
        self.names.append(name)
        return name

    def _add_assignment(self, code: str, node: ast.Assign) -> None:
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            raise ValidatorCodeError("unexpected assignment in fastjsonschema output")
        if target.id in ("VERSION", "NoneType"):
            return
        if target.id != "REGEX_PATTERNS" or not isinstance(node.value, ast.Dict):
            raise ValidatorCodeError(f"unexpected global {target.id} in fastjsonschema output")
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
                raise ValidatorCodeError("unexpected REGEX_PATTERNS key")
            compiled = _segment(code, value)
            if self.patterns.setdefault(key.value, compiled) != compiled:
                # The same pattern text compiled two ways (pattern versus patternProperties).
                raise ValidatorCodeError(f"pattern {key.value!r} compiles inconsistently")

    def render(self, header: str) -> str:
        """The module text."""
        # fastjsonschema binds key sets it never reads for open objects; and the module stays
        # as fastjsonschema writes it (formatting would double its size for no reader).
        lines = [
            header + "# ruff: noqa: F841\n# fmt: off\n",
            "from __future__ import annotations",
            "",
        ]
        lines += sorted(self.imports)
        lines += ["", f'VERSION = "{fastjsonschema.VERSION}"', "", "NoneType = type(None)", ""]
        lines.append("REGEX_PATTERNS = {")
        lines += [f"    {key!r}: {value}," for key, value in sorted(self.patterns.items())]
        lines += ["}", ""]
        for function in self.functions:
            lines += ["", function, ""]
        return "\n".join(lines) + "\n"


def _segment(code: str, node: ast.AST) -> str:
    segment = ast.get_source_segment(code, node)
    if segment is None:
        raise ValidatorCodeError("cannot read back fastjsonschema output")
    return segment
