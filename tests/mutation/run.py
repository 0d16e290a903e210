"""The mutation pass (issue 40): disable each named rule in turn and run the tests mapped to it.

tests/mutation/mutations.yaml holds, per rule of tests/requirements.yaml that has one check in
code, the file, the exact original snippet, a replacement that disables the check, and the tests
that must fail under it. This runner copies the working tree (tracked and untracked, not ignored
files) to a temporary directory, applies one mutation at a time there, runs only its tests
(`pytest -x -q`, one process) and restores the file; the checkout it was started from is never
written. A mutation is killed when its tests fail, survived when they pass.

    .venv/bin/python -m tests.mutation.run [--only ID ...] [--rule RULE ...] [--keep]

Not part of `make test`: `make mutation-pass`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "tests" / "mutation" / "mutations.yaml"


@dataclass(frozen=True)
class Mutation:
    """One disabled check: where it is, what it becomes, and the tests that must notice."""

    id: str
    rule: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]


def load_catalog(path: Path = CATALOG) -> list[Mutation]:
    """The mutations of the catalog, in file order."""
    document: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [
        Mutation(
            id=entry["id"],
            rule=entry["rule"],
            file=entry["file"],
            original=entry["original"],
            replacement=entry["replacement"],
            tests=tuple(entry["tests"]),
        )
        for entry in document["mutations"]
    ]


def _copy_tree(source: Path, target: Path) -> None:
    """The files git sees in source (tracked and untracked, not ignored), and the .venv link."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw:
            continue
        relative = raw.decode()
        origin = source / relative
        if not origin.exists() or origin.is_dir():
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, destination, follow_symlinks=False)
    venv = source / ".venv"
    if venv.exists():
        (target / ".venv").symlink_to(venv.resolve())


def _run_tests(tree: Path, tests: tuple[str, ...], log: Path) -> int:
    """pytest -x -q over tests in tree; its exit code (0: all passed)."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    with log.open("wb") as output:
        return subprocess.run(command, cwd=tree, env=env, stdout=output, stderr=output).returncode


def run_one(tree: Path, mutation: Mutation, logs: Path) -> str:
    """Apply mutation in tree, run its tests, restore the file; killed, survived or error."""
    path = tree / mutation.file
    text = path.read_text(encoding="utf-8")
    if text.count(mutation.original) != 1:
        return "error: snippet not found exactly once"
    path.write_text(text.replace(mutation.original, mutation.replacement), encoding="utf-8")
    try:
        code = _run_tests(tree, mutation.tests, logs / f"{mutation.id}.log")
    finally:
        path.write_text(text, encoding="utf-8")
    if code == 0:
        return "survived"
    # 1: tests failed. 2-5: interrupted, internal error, usage error, nothing collected.
    return "killed" if code == 1 else f"error: pytest exit {code}"


def main(argv: list[str] | None = None) -> int:
    """Run the catalog (or the chosen mutations) and print one line per mutation."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=[], help="mutation ids")
    parser.add_argument("--rule", nargs="+", default=[], help="rule ids")
    parser.add_argument("--keep", action="store_true", help="keep the temporary tree and logs")
    args = parser.parse_args(argv)
    chosen = [
        m
        for m in load_catalog()
        if (not args.only or m.id in args.only) and (not args.rule or m.rule in args.rule)
    ]
    workdir = Path(tempfile.mkdtemp(prefix="mutation-pass-"))
    tree, logs = workdir / "tree", workdir / "logs"
    tree.mkdir()
    logs.mkdir()
    _copy_tree(REPO, tree)
    outcomes: dict[str, int] = {}
    try:
        for mutation in chosen:
            started = time.monotonic()
            outcome = run_one(tree, mutation, logs)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            seconds = time.monotonic() - started
            print(f"{outcome:9} {mutation.id:40} {mutation.rule}  ({seconds:.0f} s)", flush=True)
    finally:
        if args.keep:
            print(f"tree and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(" ".join(f"{name}={count}" for name, count in sorted(outcomes.items())))
    return 0 if set(outcomes) <= {"killed"} else 1


if __name__ == "__main__":
    raise SystemExit(main())
