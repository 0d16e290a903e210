"""Production code holds no test-only second paths (issue 21).

A public function or method of the service that only tests (or benchmarks) call is a path the
service never takes: tests that go through it prove nothing about the running service. Such a
helper lives in tests/support/, built on what production uses, or the test goes through the
real public path instead.

The check is by name: a function counts as used by production when its name occurs as a word in
any production source other than its own definition (a call, an import, a table entry, an entry
point in pyproject.toml). That is lenient (an unrelated use of the same name hides it) but
never wrong the other way.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("runtime", "handlers", "gateway", "publisher", "codegen", "workflow_mcp")
# Where a production name may be used from: the service itself, its generated code, examples.
USERS = (*PRODUCTION, "generated", "examples")
# Where a test-only name is used from.
TEST_USERS = ("tests", "bench")
# Non-Python files that name production functions (console entry points, make targets).
ENTRY_FILES = ("pyproject.toml", "Makefile")
WORD = re.compile(r"\w+")

# Genuinely public library API that only tests call today, each with why it stays. Keys are
# "path:name".
ALLOWED: dict[str, str] = {}


def _sources(tops: tuple[str, ...]) -> list[Path]:
    return sorted(path for top in tops for path in (ROOT / top).rglob("*.py"))


def _words(paths: list[Path]) -> dict[Path, Counter[str]]:
    return {path: Counter(WORD.findall(path.read_text(encoding="utf-8"))) for path in paths}


def _public_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("_")
    ]


def _test_only_functions() -> list[str]:
    """Each public production function whose name only tests and benchmarks use: path:name."""
    production = _words(_sources(USERS))
    used = Counter[str]()
    for counts in production.values():
        used.update(counts)
    for name in ENTRY_FILES:
        used.update(WORD.findall((ROOT / name).read_text(encoding="utf-8")))
    tested = Counter[str]()
    for counts in _words(_sources(TEST_USERS)).values():
        tested.update(counts)
    found = []
    for path in _sources(PRODUCTION):
        own = production[path]
        for name in set(_public_functions(path)):
            # Used elsewhere in production, or more than once in its own module (its definition
            # is one occurrence): production takes it. Otherwise only tests may.
            if used[name] > own[name] or own[name] > 1 or not tested[name]:
                continue
            found.append(f"{path.relative_to(ROOT).as_posix()}:{name}")
    return sorted(found)


def test_no_public_production_function_is_used_only_by_tests() -> None:
    unexplained = [entry for entry in _test_only_functions() if entry not in ALLOWED]
    assert unexplained == [], (
        "production functions only tests or benchmarks use (move them to tests/support/, or "
        f"test through the public path): {unexplained}"
    )


def test_every_allowed_entry_is_still_test_only_and_explained() -> None:
    found = set(_test_only_functions())
    assert [entry for entry in ALLOWED if entry not in found] == []
    assert all(reason.strip() for reason in ALLOWED.values())
