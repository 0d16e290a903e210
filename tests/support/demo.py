"""Trivial task handlers for the worker CLI, the benchmark and the tests."""

from __future__ import annotations

import asyncio

from runtime.scheduler.lease import TaskHandler, TaskLease
from runtime.scheduler.models import ClaimedTask, NewTask, TaskOutcome


async def echo(task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
    """Finish the run with the task's payload."""
    return TaskOutcome.finish_run({"echo": task.payload, "worker_step": task.step_no})


async def chain(task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
    """Enqueue the next step until payload.remaining reaches zero, then finish the run."""
    remaining = int(task.payload.get("remaining", 0))
    if remaining > 0:
        return TaskOutcome.then(NewTask("chain", {"remaining": remaining - 1}))
    return TaskOutcome.finish_run({"steps": task.step_no + 1})


async def sleep(task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
    """Sleep payload.ms milliseconds, then finish the run (a slow read)."""
    await asyncio.sleep(int(task.payload.get("ms", 0)) / 1000)
    return TaskOutcome.finish_run({"slept_ms": task.payload.get("ms", 0)})


async def write(task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
    """A side-effecting step: mark possible, 'dispatch' for payload.ms, confirm, finish."""
    if lease.prior_step is not None and lease.prior_step.effect_state == "confirmed":
        return TaskOutcome.finish_run({"written": True, "resumed": True})
    await lease.mark_effect_possible()
    await asyncio.sleep(int(task.payload.get("ms", 0)) / 1000)
    await lease.confirm_effect({"written": True})
    if task.payload.get("then"):
        return TaskOutcome.then(NewTask("echo", {"after": "write"}))
    return TaskOutcome.finish_run({"written": True})


HANDLERS: dict[str, TaskHandler] = {"echo": echo, "chain": chain, "sleep": sleep, "write": write}
