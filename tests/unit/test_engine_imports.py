"""The engine's modules import each other without a cycle, and its parts only downward.

Every import counts, also those inside functions and under TYPE_CHECKING: a cycle hidden in a
function is still a cycle in the design (issue 8: straight layers). A sub-package's
``__init__`` is a module too (named after the package), so importing a name from a package is
an edge to its ``__init__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "runtime" / "engine"
PACKAGE = "runtime.engine"

# The engine's parts, top to bottom: a part imports its own modules and lower parts only.
# The engine's own ``__init__`` sits above them all (it re-exports the entry points).
PARTS: tuple[tuple[str, ...], ...] = (
    # convert rewrites light-workflow definitions; it reads only CEL, never runs or checks.
    ("run", "convert"),
    ("check",),
    ("parse",),
    ("cel",),
    ("model", "step_meter"),
)
PART_LEVEL = {part: level for level, parts in enumerate(PARTS) for part in parts}


def module_name(path: Path) -> str:
    """Dotted name of one engine source file (a package's ``__init__`` is the package)."""
    parts = path.relative_to(ENGINE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


def engine_files() -> dict[str, Path]:
    """Every engine module by dotted name, sub-packages included."""
    return {module_name(path): path for path in sorted(ENGINE.rglob("*.py"))}


def engine_modules() -> set[str]:
    """Dotted names of the engine's modules."""
    return set(engine_files())


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """Engine modules one file imports (`from runtime.engine.cel import x` names module x)."""
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
    files = engine_files()
    modules = set(files)
    return {name: imports_of(path, modules) - {name} for name, path in files.items()}


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


def part_of(module: str) -> str | None:
    """The engine part (sub-package or foundation module) of a dotted name; None for the top."""
    rest = module.removeprefix(PACKAGE).lstrip(".")
    return rest.split(".")[0] if rest else None


def upward_imports() -> list[str]:
    """Imports from one part of the engine into a part on a higher layer."""
    problems: list[str] = []
    for module, imported in sorted(import_graph().items()):
        importer = part_of(module)
        if importer is None:
            continue
        for target in sorted(imported):
            part = part_of(target)
            if part is None or PART_LEVEL[part] < PART_LEVEL[importer]:
                problems.append(f"{module} imports {target} ({importer} -> {part or PACKAGE})")
    return problems


def test_every_engine_module_is_in_a_declared_part() -> None:
    parts = {part_of(module) for module in engine_modules()} - {None}
    assert sorted(part for part in parts if part not in PART_LEVEL) == []


def test_the_engine_parts_import_only_downward() -> None:
    assert upward_imports() == []


def test_the_engine_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_graph_sees_the_modules_of_sub_packages() -> None:
    graph = import_graph()
    assert "runtime.engine.cel.compiler" in graph["runtime.engine.cel.value_trees"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
