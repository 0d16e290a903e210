"""The runtime's packages import only downward, in one declared order (issue 8: straight layers).

A package may import itself and any package on a lower layer, never one on its own layer or
above. Imports inside functions and under TYPE_CHECKING count too: a hidden upward import is
still an upward import in the design. The Gateway and the publisher are clients of the runtime
(issue 21): the runtime never imports them, and they use only what its packages export.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Top to bottom. Each entry is a package or a single module of runtime/, or a top-level package.
LAYERS: tuple[tuple[str, ...], ...] = (
    # `python -m runtime.cli`, the historical name of the entry point: an alias of it, nothing else.
    ("runtime.cli",),
    # The entry point: wires the clients' commands into the service's command line.
    ("workflow_mcp",),
    ("publisher",),
    ("gateway",),
    ("runtime.composition",),
    # The console's pages (issue 39): tool calls through runtime.mcp's dispatcher.
    ("runtime.console",),
    ("handlers",),
    ("runtime.mcp",),
    ("runtime.collaborators",),
    ("runtime.mcp_tasks",),
    ("runtime.settings",),
    # The Lightspeed receiver bridge (issue 37): admits through runtime.admission.
    ("runtime.receiver",),
    ("runtime.features",),
    # AI-assisted authoring (issue 38): drafts from the publication catalog and the engine.
    ("runtime.authoring",),
    ("runtime.admission",),
    ("runtime.invocation",),
    ("runtime.execution",),
    ("runtime.human_tasks",),
    ("runtime.publication", "runtime.scheduler"),
    ("runtime.engine", "runtime.store", "runtime.security", "runtime.telemetry"),
    (
        "runtime.canonical",
        "runtime.binding_reach",
        "runtime.addresses",
        "runtime.errors",
        "runtime.cancellation",
        "runtime.lightspeed",
    ),
)
LEVEL = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str | None:
    """The layer unit (package or module) a dotted module name belongs to."""
    parts = module.split(".")
    for size in (2, 1):
        name = ".".join(parts[:size])
        if name in LEVEL:
            return name
    return None


def module_name(path: Path) -> str:
    """Dotted module name of a source file under ROOT."""
    relative = path.relative_to(ROOT).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Every module a file names in an import statement, at any depth."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def upward_imports() -> list[str]:
    """Imports that reach a unit on the importer's own layer or above."""
    problems: list[str] = []
    sources = [
        *sorted((ROOT / "runtime").rglob("*.py")),
        *sorted((ROOT / "handlers").glob("*.py")),
        *sorted((ROOT / "gateway").rglob("*.py")),
        *sorted((ROOT / "publisher").rglob("*.py")),
        *sorted((ROOT / "workflow_mcp").rglob("*.py")),
    ]
    for path in sources:
        if path == ROOT / "runtime" / "__init__.py":
            continue  # the namespace's own docstring
        importer = unit_of(module_name(path))
        assert importer is not None, f"{path} is on no declared layer"
        for module in sorted(imported_modules(path)):
            target = unit_of(module)
            if target is None or target == importer:
                continue
            if LEVEL[target] <= LEVEL[importer]:
                problems.append(f"{module_name(path)} imports {module} ({importer} -> {target})")
    return sorted(set(problems))


def test_every_runtime_import_points_down_the_declared_layers() -> None:
    assert upward_imports() == []


def test_every_runtime_package_is_on_a_layer() -> None:
    packages = {
        f"runtime.{path.name}" for path in (ROOT / "runtime").iterdir() if path.is_dir()
    } | {f"runtime.{path.stem}" for path in (ROOT / "runtime").glob("*.py")}
    packages -= {"runtime.__init__", "runtime.__pycache__"}
    assert sorted(package for package in packages if package not in LEVEL) == []


def dynamic_imports(path: Path) -> list[str]:
    """importlib imports and __import__ calls in a file: imports a reader cannot follow."""
    found = sorted(
        module
        for module in imported_modules(path)
        if module == "importlib" or module.startswith("importlib.")
    )
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Name)]
    return found + ["__import__" for node in calls if node.id == "__import__"]


def test_the_transport_discovers_no_module_at_run_time() -> None:
    # Handlers come from the explicit table handlers.HANDLERS, so a tool's trail from the
    # transport to its handler is all plain imports.
    problems = {
        module_name(path): dynamic_imports(path)
        for path in sorted((ROOT / "runtime" / "mcp").rglob("*.py"))
        if dynamic_imports(path)
    }
    assert problems == {}


CLIENTS = ("gateway", "publisher")


def test_nothing_in_runtime_imports_the_gateway_or_the_publisher() -> None:
    # They are clients of the runtime; the entry point (workflow_mcp) wires them in.
    problems = [
        f"{module_name(path)} imports {module}"
        for path in sorted((ROOT / "runtime").rglob("*.py"))
        for module in sorted(imported_modules(path))
        if module.split(".")[0] in CLIENTS
    ]
    assert problems == []


def runtime_names_imported(path: Path) -> list[str]:
    """Each runtime module a file imports from, or a runtime name it imports, as written."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "runtime":
                found += [f"runtime.{alias.name}" for alias in node.names]
            elif node.module.startswith("runtime."):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("runtime.")]
    return found


def test_the_gateway_and_the_publisher_import_only_what_runtime_packages_export() -> None:
    # A package's (or a single-module unit's) own names, never a module inside a package: what
    # a runtime package keeps to itself may change without a client noticing.
    problems = [
        f"{module_name(path)} imports from {module}"
        for client in CLIENTS
        for path in sorted((ROOT / client).rglob("*.py"))
        for module in runtime_names_imported(path)
        if module not in LEVEL
    ]
    assert problems == []


MAX_MODULES_PER_FOLDER = 15


def test_no_runtime_folder_holds_more_than_fifteen_modules() -> None:
    # Past that a folder stops saying what it holds: split it into sub-packages by concern.
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in [ROOT / "runtime", *(ROOT / "runtime").rglob("*/")]
        if folder.is_dir() and folder.name != "__pycache__"
        for count in [sum(1 for f in folder.glob("*.py") if f.name != "__init__.py")]
        if count > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def test_no_runtime_module_rebinds_a_global() -> None:
    # Process state lives in objects the composition builds and hands on (runtime.admission's
    # Admission, the per-database registries), never in module names a function rebinds.
    rebinding = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "runtime").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Global)
    ]
    assert rebinding == []
