"""The durable task queue: fair fenced claiming, wake-up, leases, effect and budget ledgers.

Other domains change run state only through ``runtime.scheduler.service`` and read it in SQL
only through the ``workflow_run_state`` view (migration 0023), never the scheduler's tables;
the one exception is a run parked on a human task, which ``runtime.human_tasks`` wakes and
resumes (its queries ``wake_parked_task`` and ``resume_waiting_run``).
"""

from __future__ import annotations

from runtime.scheduler.errors import LeaseLost, timeout_error
from runtime.scheduler.executor import Executor
from runtime.scheduler.lease import DispatchBudgeted, TaskHandler, TaskLease
from runtime.scheduler.models import (
    BudgetAmounts,
    ClaimedTask,
    NewTask,
    SchedulerSettings,
    TaskOutcome,
)
from runtime.scheduler.probe import ClassLoadRow, QueueProbe, read_class_load
from runtime.scheduler.service import enqueue_process, get_process
from runtime.scheduler.store.queue import claimed_first_task
from runtime.scheduler.wakeup import (
    Reservation,
    announce_task,
    executors_here,
    reserve_local_slot,
)

__all__ = [
    "BudgetAmounts",
    "ClaimedTask",
    "ClassLoadRow",
    "DispatchBudgeted",
    "Executor",
    "LeaseLost",
    "NewTask",
    "QueueProbe",
    "Reservation",
    "SchedulerSettings",
    "TaskHandler",
    "TaskLease",
    "TaskOutcome",
    "announce_task",
    "claimed_first_task",
    "enqueue_process",
    "executors_here",
    "get_process",
    "read_class_load",
    "reserve_local_slot",
    "timeout_error",
]
