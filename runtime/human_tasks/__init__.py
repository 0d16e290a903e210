"""Human tasks of workflow_start runs: the rows an `ask` waits on, and how a run parks on them."""

from __future__ import annotations

from runtime.human_tasks.inbox import complete_task, get_task, list_tasks
from runtime.human_tasks.parking import park, sample_open_tasks, settle
from runtime.human_tasks.resume import HUMAN_TASK_KEY

__all__ = [
    "HUMAN_TASK_KEY",
    "complete_task",
    "get_task",
    "list_tasks",
    "park",
    "sample_open_tasks",
    "settle",
]
