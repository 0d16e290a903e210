"""Which context keys every path, or only some paths, have exported before each top-level task.

light-workflow's context gains a key when a task's `export.as` names it, and keeps it for the
rest of the run. A forward pass over the top-level task list (switch cases, `then` jumps,
`end: true`) finds, for each task, the keys exported on every path into it and on some.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_NESTED_LISTS = ("do", "try")
_STOPS = frozenset({"end", "exit"})


@dataclass(frozen=True)
class Reach:
    """Keys exported before a task: on every path (exported) and on at least one (maybe)."""

    exported: frozenset[str]
    maybe: frozenset[str]


def task_entries(tasks: Sequence[Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The (name, task) pairs of a task list, skipping malformed entries."""
    entries: list[tuple[str, Mapping[str, Any]]] = []
    for item in tasks:
        if isinstance(item, Mapping) and len(item) == 1:
            name, task = next(iter(item.items()))
            if isinstance(task, Mapping):
                entries.append((str(name), task))
    return entries


def reach_before(tasks: Sequence[Any]) -> list[Reach]:
    """For each top-level task, the keys exported on every path and on some path into it."""
    entries = task_entries(tasks)
    index = {name: position for position, (name, _) in enumerate(entries)}
    reached: list[Reach | None] = [None] * len(entries)
    if entries:
        reached[0] = Reach(frozenset(), frozenset())
    changed = True
    while changed:
        changed = False
        for position, (_, task) in enumerate(entries):
            before = reached[position]
            if before is None:
                continue
            surely, possibly = exports_of(task)
            after = Reach(before.exported | surely, before.maybe | surely | possibly)
            for target in _successors(task, position, index):
                merged = _merge(reached[target], after)
                if merged != reached[target]:
                    reached[target], changed = merged, True
    return [entry or Reach(frozenset(), frozenset()) for entry in reached]


def exports_of(task: Mapping[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """Keys a task exports whenever it runs, and keys only its nested tasks (or `if`) export."""
    own = _export_keys(task)
    nested = frozenset(key for child in _nested_tasks(task) for key in _export_keys(child))
    if "if" in task:
        return frozenset(), own | nested
    return own, nested


def _export_keys(task: Mapping[str, Any]) -> frozenset[str]:
    export = task.get("export")
    keys = export.get("as") if isinstance(export, Mapping) else None
    return frozenset(map(str, keys)) if isinstance(keys, Mapping) else frozenset()


def _nested_tasks(task: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for _, child in nested_entries(task):
        yield child
        yield from _nested_tasks(child)


def nested_entries(task: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The (path suffix, task) pairs of a composite task's direct children."""
    lists: list[tuple[str, Any]] = [(key, task.get(key)) for key in _NESTED_LISTS]
    loop, fork, catch = task.get("for"), task.get("fork"), task.get("catch")
    if isinstance(loop, Mapping) or "for" in task:
        lists.append(("do", task.get("do")))
    if isinstance(fork, Mapping):
        lists.append(("fork/branches", fork.get("branches")))
    if isinstance(catch, Mapping):
        lists.append(("catch/do", catch.get("do")))
    seen: set[str] = set()
    for key, value in lists:
        if key in seen or not isinstance(value, list):
            continue
        seen.add(key)
        for position, (name, child) in enumerate(task_entries(value)):
            yield f"{key}/{position}/{name}", child


def _successors(task: Mapping[str, Any], position: int, index: Mapping[str, int]) -> list[int]:
    targets: list[Any] = []
    cases = task.get("switch")
    if isinstance(cases, list):
        defaulted = False
        for case in cases:
            body = next(iter(case.values()), None) if isinstance(case, Mapping) else None
            if isinstance(body, Mapping):
                targets.append(body.get("then", "continue"))
                defaulted = defaulted or "when" not in body
        if not defaulted:
            targets.append(task.get("then", "continue"))
    elif task.get("end") is True:
        targets.append("end")
    else:
        targets.append(task.get("then", "continue"))
    found: list[int] = []
    for target in targets:
        if target == "continue" and position + 1 < len(index):
            found.append(position + 1)
        elif isinstance(target, str) and target not in _STOPS and target in index:
            found.append(index[target])
    return found


def _merge(current: Reach | None, incoming: Reach) -> Reach:
    if current is None:
        return incoming
    return Reach(current.exported & incoming.exported, current.maybe | incoming.maybe)
