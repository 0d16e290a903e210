"""Human tasks of workflow_start runs: the rows an `ask` waits on, the inbox, parking, resuming.

- ``parking``: the runner opens an ask's task and parks the run; the scheduler's insert of the
  parked task fires migration 0080's trigger ``workflow_task_park_on_human_task`` (WAITING).
- ``inbox``: workflow_task_list, workflow_task_get and workflow_task_complete (who sees what).
- ``resume``: an answer wakes the parked task; its claim settles the answers (RUNNING again).
- ``store`` and ``queries.sql``: the statements; a run that ends closes its open tasks by
  migration 0081's trigger ``workflow_process_close_human_tasks`` (cancelled).
"""

from __future__ import annotations

from runtime.human_tasks.inbox import complete_task, get_task, list_tasks
from runtime.human_tasks.parking import park, parked_task_payload, sample_open_tasks, settle

__all__ = [
    "complete_task",
    "get_task",
    "list_tasks",
    "park",
    "parked_task_payload",
    "sample_open_tasks",
    "settle",
]
