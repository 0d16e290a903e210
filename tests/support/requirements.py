"""Reading tests/requirements.yaml and the suite's tests and requirement markers, by ast.

Parsing instead of collecting keeps the manifest check fast: no module of the suite is imported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "tests" / "requirements.yaml"


@dataclass
class SuiteIndex:
    """Every test node id (file::function, file::Class::method) and its requirement markers."""

    tests: set[str] = field(default_factory=set)
    markers: dict[str, set[str]] = field(default_factory=dict)


def load_manifest(path: Path = MANIFEST) -> list[dict[str, Any]]:
    """The rules of the manifest, in file order."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    rules: list[dict[str, Any]] = document["rules"]
    return rules


def _requirement_values(node: ast.expr) -> list[str]:
    """The refs of pytest.mark.requirement("...") calls in an expression (a list or one call)."""
    calls = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    values = []
    for call in calls:
        if (
            isinstance(call, ast.Call)
            and _names_requirement(call.func)
            and call.args
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
        ):
            values.append(call.args[0].value)
    return values


def _names_requirement(func: ast.expr) -> bool:
    """pytest.mark.requirement, or a module alias named requirement."""
    if isinstance(func, ast.Attribute):
        return func.attr == "requirement"
    return isinstance(func, ast.Name) and func.id == "requirement"


def _module_marks(tree: ast.Module) -> list[str]:
    marks: list[str] = []
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark"
            for target in statement.targets
        ):
            marks.extend(_requirement_values(statement.value))
    return marks


def _test_functions(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """(name within the module, node) of every test function, including Test* class methods."""
    found: list[tuple[str, ast.AST]] = []
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for statement in tree.body:
        if isinstance(statement, functions) and statement.name.startswith("test_"):
            found.append((statement.name, statement))
        elif isinstance(statement, ast.ClassDef) and statement.name.startswith("Test"):
            for member in statement.body:
                if isinstance(member, functions) and member.name.startswith("test_"):
                    found.append((f"{statement.name}::{member.name}", member))
    return found


def index_suite(root: Path = REPO / "tests") -> SuiteIndex:
    """Parse every test module under root."""
    index = SuiteIndex()
    for path in sorted(root.rglob("test_*.py")):
        relative = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=relative)
        module_marks = _module_marks(tree)
        for name, node in _test_functions(tree):
            node_id = f"{relative}::{name}"
            index.tests.add(node_id)
            decorators = getattr(node, "decorator_list", [])
            marks = module_marks + [v for d in decorators for v in _requirement_values(d)]
            for ref in marks:
                index.markers.setdefault(ref, set()).add(node_id)
    return index
