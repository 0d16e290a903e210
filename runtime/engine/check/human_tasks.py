"""Static facts of a definition's human tasks (`ask`): who is asked, and the worst-case wait."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.engine.model import AskSpec, WorkflowDefinition, thaw, walk_tasks


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
    """The longest a run may wait for people: its asks' timeouts summed (each ask is top-level
    and runs at most once), within the workflow's timeout; None when an ask has no timeout and
    the workflow none either (then only the run's deadline ends the wait)."""
    facts = human_tasks(definition)
    timeouts = [fact.timeout_ms for fact in facts]
    total = None if None in timeouts else sum(t or 0 for t in timeouts)
    if definition.timeout_ms is not None and facts:
        return definition.timeout_ms if total is None else min(total, definition.timeout_ms)
    return total
