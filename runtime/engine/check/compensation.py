"""Which writes of a multi-write workflow carry no `compensate:` (a `workflow-mcp check` warning).

A workflow with two or more writes that fails after the first leaves it in place unless the
runtime can undo it (runtime.execution.compensation). The writes a compensation body makes
are not counted: they are the undo, not the workflow's effects.
"""

from __future__ import annotations

from runtime.engine.check.static_requirements import WriteTask, write_tasks
from runtime.engine.model import WorkflowDefinition, walk_tasks

UNCOMPENSATED_WRITE = "uncompensated-write"


def uncompensated_writes(definition: WorkflowDefinition) -> list[WriteTask]:
    """The writes without `compensate:` of a workflow with at least two writes."""
    undo: set[str] = set()
    compensated: set[str] = set()
    for task in walk_tasks(definition.tasks):
        if task.compensate is not None:
            compensated.add(task.pointer)
            undo |= {inner.pointer for inner in walk_tasks(task.compensate.body)}
    writes = [task for task in write_tasks(definition) if task.pointer not in undo]
    if len(writes) < 2:
        return []
    return [task for task in writes if task.pointer not in compensated]


def uncompensated_message(task: WriteTask) -> str:
    """The warning of one uncompensated write."""
    return (
        f"write task {task.qualified_name} ({task.kind} {task.target}) has no compensate: if "
        "the run fails after it, its effect stays in place"
    )
