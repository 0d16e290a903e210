"""The engine's modules import each other without a cycle (issue 8: straight layers).

Every import counts, also those inside functions and under TYPE_CHECKING: a cycle hidden in a
function is still a cycle in the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "runtime" / "engine"
PACKAGE = "runtime.engine"


def engine_modules() -> set[str]:
    """Dotted names of the engine's modules."""
    return {f"{PACKAGE}.{path.stem}" for path in ENGINE.glob("*.py") if path.stem != "__init__"}


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """Engine modules one file imports (`from runtime.engine import x` names module x)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            named = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            found |= named or ({node.module} & modules)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names} & modules
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the engine modules it imports."""
    modules = engine_modules()
    return {
        f"{PACKAGE}.{path.stem}": imports_of(path, modules) - {f"{PACKAGE}.{path.stem}"}
        for path in ENGINE.glob("*.py")
        if path.stem != "__init__"
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path that returns to its start, or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            cycle = visit(imported, [*path, module])
            if cycle is not None:
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle is not None:
            return cycle
    return None


def test_the_engine_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
