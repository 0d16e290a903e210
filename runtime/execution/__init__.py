"""Runs a workflow definition durably on the scheduler: checkpoints, effects, budget, calls."""

from __future__ import annotations

from runtime.execution.effects import AFTER_DISPATCH_POINT, CALL_SLOTS, DurableEffects
from runtime.execution.service import (
    RunWatch,
    admit_run,
    first_task_payload,
    forget_expired_credentials,
    read_run,
    wait_for_result,
    watch_run,
)
from runtime.execution.settings import ExecutionSettings, ServiceTokenSettings
from runtime.execution.store import RunSpec, SpecLimits
from runtime.execution.task_runner import WORKFLOW_TASK_KIND, WorkflowRuntime
from runtime.execution.waiter import (
    TERMINAL_STATES,
    close_waiter,
    configure_waiter,
    stop_waiting,
)

__all__ = [
    "AFTER_DISPATCH_POINT",
    "CALL_SLOTS",
    "TERMINAL_STATES",
    "WORKFLOW_TASK_KIND",
    "DurableEffects",
    "ExecutionSettings",
    "RunSpec",
    "RunWatch",
    "ServiceTokenSettings",
    "SpecLimits",
    "WorkflowRuntime",
    "admit_run",
    "close_waiter",
    "configure_waiter",
    "first_task_payload",
    "forget_expired_credentials",
    "read_run",
    "stop_waiting",
    "wait_for_result",
    "watch_run",
]
