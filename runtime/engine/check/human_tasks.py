"""Static facts of a definition's human tasks (`ask`): who is asked, and the worst-case wait."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.engine.check.static_requirements import loop_bound
from runtime.engine.model import (
    AskSpec,
    ForSpec,
    Task,
    TaskList,
    TrySpec,
    WorkflowDefinition,
    thaw,
    walk_tasks,
)


@dataclass(frozen=True)
class HumanTaskFact:
    """One ask: where, whom it assigns, its answers and how long it may wait."""

    qualified_name: str
    pointer: str
    assignment: dict[str, Any]
    values: tuple[str, ...]
    timeout_ms: int | None
    on_timeout: str

    def document(self) -> dict[str, Any]:
        """The fact as check's JSON prints it."""
        return {
            "task": self.qualified_name,
            "pointer": self.pointer,
            "assignment": self.assignment,
            "values": list(self.values),
            "timeoutMs": self.timeout_ms,
            "onTimeout": self.on_timeout,
        }


def human_tasks(definition: WorkflowDefinition) -> list[HumanTaskFact]:
    """Every ask of the definition, in document order."""
    return [
        HumanTaskFact(
            task.qualified_name,
            task.pointer,
            dict(thaw(spec.assignment)),
            tuple(option.value for option in spec.options),
            spec.timeout_ms,
            spec.on_timeout,
        )
        for task in walk_tasks(definition.tasks)
        if isinstance(spec := task.spec, AskSpec)
    ]


def worst_case_human_wait_ms(definition: WorkflowDefinition) -> int | None:
    """The longest a run may wait for people: its asks' timeouts summed over every task that
    may run (a `for` body's once per iteration up to the loop's bound, a retried `try` body's
    once per attempt), within the workflow's timeout; None when an ask may wait with no
    timeout and the workflow has none either (then only the run's deadline ends the wait)."""
    if not any(isinstance(task.spec, AskSpec) for task in walk_tasks(definition.tasks)):
        return 0
    total = _list_wait(definition, definition.tasks)
    if definition.timeout_ms is not None:
        return definition.timeout_ms if total is None else min(total, definition.timeout_ms)
    return total


def _list_wait(definition: WorkflowDefinition, tasks: TaskList) -> int | None:
    # `then` jumps go forward only, so each task of a list runs at most once per pass.
    waits = [_task_wait(definition, task) for task in tasks.tasks]
    return None if None in waits else sum(w or 0 for w in waits)


def _task_wait(definition: WorkflowDefinition, task: Task) -> int | None:
    spec = task.spec
    if isinstance(spec, AskSpec):
        return spec.timeout_ms
    if isinstance(spec, ForSpec):
        body = _list_wait(definition, spec.body)
        return body if not body else loop_bound(definition, spec) * body
    if isinstance(spec, TrySpec):
        return _try_wait(definition, spec)
    waits = [_list_wait(definition, child) for child in task.children()]
    return None if None in waits else sum(w or 0 for w in waits)


def _try_wait(definition: WorkflowDefinition, spec: TrySpec) -> int | None:
    body = _list_wait(definition, spec.body)
    catch = 0 if spec.catch.body is None else _list_wait(definition, spec.catch.body)
    if body is None or catch is None:
        return None
    retry = spec.catch.retry
    if retry is not None and body:
        if retry.attempt_count is None:
            return None  # retried without a bound: each attempt may ask again
        body *= retry.attempt_count + 1
    return body + catch
