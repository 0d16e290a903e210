"""Human tasks of workflow_start runs: the rows an `ask` waits on, and how a run parks on them."""

from __future__ import annotations

from runtime.execution.human_tasks.parking import answer_output, park, sample_open_tasks, settle
from runtime.execution.human_tasks.store import Assignee

__all__ = ["Assignee", "answer_output", "park", "sample_open_tasks", "settle"]
