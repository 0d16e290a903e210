"""What a write task with `compensate:` ledgers for its undo (runtime.engine.run.compensation)."""

from __future__ import annotations

from typing import Any

from runtime.engine.model import Task, thaw
from runtime.engine.run.runner import Runner


def compensation_mark(runner: Runner, task: Task) -> dict[str, Any] | None:
    """What the write of task ledgers for its compensation (None: it carries none)."""
    if task.compensate is None:
        return None
    return {
        "task": task.pointer,
        "name": task.name,
        "when": task.compensate.when,
        "context": thaw(runner.state.context),
        "workflowInput": thaw(runner.state.workflow_input),
    }
