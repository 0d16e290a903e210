"""Backward `then` jumps: light-workflow's loops, which the converter names and does not rewrite.

light-workflow runs a jump back as often as its conditions say; nothing in the definition
bounds it. The profile's one loop, `for`, needs a static bound, cannot hold an `ask` (a run
parks only between top-level tasks) and cannot jump out to a top-level task. A rewrite would
have to invent the bound, and a loop that reached it would end differently than it does in
light-workflow, so each backward jump is named with what to write instead (docs/MIGRATING.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from runtime.engine.convert.context_flow import task_entries
from runtime.engine.convert.tasks import Blocker

# The task lists a task may hold, as paths below it (`for` keeps its body under `do`).
_NESTED_LISTS = ("do", "try", "catch/do", "fork/branches")

BACKWARD_REASON = (
    "`then: {target}` jumps back to {back}, a loop that light-workflow repeats as often as its "
    "conditions say ({why}); the profile refuses a loop it cannot bound, and its bounded loop "
    "(`for`) {limits}. Instead: to retry a failing call, wrap it in `try` with `catch.retry` "
    "and `limit.attempt.count`; to go round a decision again, end this run with a status "
    "(for example `then: end` after a `set`) and start a new run for the next round"
)


def backward_jumps(tasks: Sequence[Any], pointer: str = "/do") -> list[Blocker]:
    """Every `then` in the task list (and nested lists) that targets an earlier or same task."""
    entries = task_entries(tasks)
    index = {name: position for position, (name, _) in enumerate(entries)}
    found: list[Blocker] = []
    for position, (name, task) in enumerate(entries):
        where = f"{pointer}/{position}/{name}"
        for then_pointer, target in _jumps(task, where):
            back = index.get(target)
            if back is not None and back <= position:
                region = [entry for _, entry in entries[back : position + 1]]
                found.append(_blocker(then_pointer, target, f"{pointer}/{back}/{target}", region))
        for key in _NESTED_LISTS:
            found.extend(_nested(task, where, key))
    return found


def _nested(task: Mapping[str, Any], where: str, key: str) -> list[Blocker]:
    node: Any = task
    for part in key.split("/"):
        node = node.get(part) if isinstance(node, Mapping) else None
    return backward_jumps(node, f"{where}/{key}") if isinstance(node, list) else []


def _jumps(task: Mapping[str, Any], where: str) -> Iterator[tuple[str, str]]:
    if isinstance(task.get("then"), str):
        yield f"{where}/then", task["then"]
    cases = task.get("switch")
    for position, case in enumerate(cases if isinstance(cases, list) else ()):
        for name, body in case.items() if isinstance(case, Mapping) else ():
            if isinstance(body, Mapping) and isinstance(body.get("then"), str):
                yield f"{where}/switch/{position}/{name}/then", body["then"]


def _blocker(then_pointer: str, target: str, back: str, region: list[Any]) -> Blocker:
    asks = any(isinstance(task, Mapping) and "ask" in task for task in region)
    why = "here, a person's answer" if asks else "no counter or limit in the definition"
    limits = "needs a static bound" + (
        " and cannot hold an `ask`, which must stay a top-level task" if asks else ""
    )
    reason = BACKWARD_REASON.format(target=target, back=back, why=why, limits=limits)
    return Blocker(then_pointer, "then (backward jump)", reason, "jumps backward")
