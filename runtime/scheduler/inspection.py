"""Run inspection for operators: list a host's runs; show one run's timeline, effects, budget."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict
from datetime import datetime
from typing import Any

import msgspec

from generated.models import RuntimeBounds
from runtime.errors import input_invalid
from runtime.scheduler.service import DEFAULT_BUDGET, get_process
from runtime.scheduler.store import inspection as store
from runtime.scheduler.store.inspection import ListedStep, ListedTask, RunOrigin
from runtime.store import Database

RUN_STATES = ("ACCEPTED", "RUNNING", "WAITING", "COMPLETED", "FAILED", "CANCELLED")
COMPENSATION_STATES = ("running", "completed", "failed")
MAX_LISTED = 1000
MAX_TOOL_LENGTH = 256
# The budget counters, each with a remaining_<name> column.
BUDGET_COUNTERS = (
    "attempts",
    "nested_calls",
    "request_bytes",
    "intermediate_bytes",
    "result_bytes",
    "cost_units",
)


def _uuid(value: str, name: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise input_invalid(f"{name} must be a UUID") from None


async def list_runs(
    db: Database,
    host_id: str,
    *,
    state: str | None = None,
    tool: str | None = None,
    limit: int = 50,
    compensation: str | None = None,
) -> list[dict[str, Any]]:
    """A host's runs, newest first; state, tool (its id or name) and the state of their
    compensation narrow them."""
    if state is not None and state not in RUN_STATES:
        raise input_invalid(f"state must be one of {', '.join(RUN_STATES)}")
    if compensation is not None and compensation not in COMPENSATION_STATES:
        raise input_invalid(f"compensation must be one of {', '.join(COMPENSATION_STATES)}")
    if not 0 < limit <= MAX_LISTED:
        raise input_invalid(f"limit must be between 1 and {MAX_LISTED}")
    if tool is not None and not 0 < len(tool) <= MAX_TOOL_LENGTH:
        raise input_invalid(f"tool must be a Tool id or name of at most {MAX_TOOL_LENGTH} chars")
    async with db.transaction(read_only=True) as conn:
        runs = await store.select_runs(
            conn, _uuid(host_id, "host"), state, tool, limit, compensation
        )
    return [msgspec.structs.asdict(run) for run in runs]


async def show_run(db: Database, host_id: str, process_id: str) -> dict[str, Any] | None:
    """One run (state, effect state, budget, result, error), its tasks, effects and timeline."""
    host, process = _uuid(host_id, "host"), _uuid(process_id, "run id")
    row = await get_process(db, host, process)
    if row is None:
        return None
    # The operator's document: every column of the run, then what the views below add.
    run = msgspec.structs.asdict(row)
    async with db.transaction(read_only=True, isolation="repeatable read") as conn:
        tasks = await store.select_tasks(conn, host, process)
        steps = await store.select_steps(conn, host, process)
        origin = await store.select_origin(conn, host, process)
    return {
        **run,
        "operation": None if origin is None else origin.operation,
        "tool_id": None if origin is None else origin.tool_id,
        "tool_name": None if origin is None else origin.tool_name,
        "budget": budget_of(run, origin),
        "tasks": [msgspec.structs.asdict(task) for task in tasks],
        "effects": [msgspec.structs.asdict(step) for step in steps],
        "timeline": timeline(run, tasks, steps),
    }


def _ceilings(bounds: RuntimeBounds) -> dict[str, int]:
    """The budget ceilings an invoked run got from its revision's runtimeBounds."""
    return {
        "attempts": bounds.maximum_task_attempts,
        "nested_calls": bounds.maximum_nested_calls,
        "request_bytes": bounds.maximum_request_bytes,
        "intermediate_bytes": bounds.maximum_intermediate_bytes,
        "result_bytes": bounds.maximum_result_bytes,
        "cost_units": bounds.maximum_cost_units,
    }


def budget_of(run: Mapping[str, Any], origin: RunOrigin | None) -> dict[str, Any]:
    """Per counter: the ceiling (when known), what remains and what was used."""
    ceilings: dict[str, int] | None = None
    if origin is not None and origin.runtime_bounds is not None:
        ceilings = _ceilings(origin.runtime_bounds)
    elif origin is not None and origin.operation == "start":
        ceilings = asdict(DEFAULT_BUDGET)  # workflow_start runs get the default ceilings
    budget: dict[str, Any] = {}
    for name in BUDGET_COUNTERS:
        remaining = run.get(f"remaining_{name}")
        limit = None if ceilings is None else ceilings[name]
        used = None if limit is None or remaining is None else limit - int(remaining)
        budget[name] = {"limit": limit, "remaining": remaining, "used": used}
    return budget


def timeline(
    run: Mapping[str, Any], tasks: list[ListedTask], steps: list[ListedStep]
) -> list[dict[str, Any]]:
    """The run's events in time order: accepted, each task's enqueue and last state, effects."""
    events: list[dict[str, Any]] = [_event(run["created_ts"], "run.accepted")]
    for task in tasks:
        where = {"step_no": task.step_no, "kind": task.kind}
        events.append(_event(task.created_ts, "task.enqueued", **where))
        if task.state != "ready" or task.attempts:
            last = {**where, "attempts": task.attempts, "worker_id": task.worker_id}
            events.append(_event(task.updated_ts, f"task.{task.state}", **last))
    for step in steps:
        events.append(_event(step.possible_ts, "effect.possible", step_no=step.step_no))
        if step.confirmed_ts is not None:
            events.append(_event(step.confirmed_ts, "effect.confirmed", step_no=step.step_no))
    if run.get("finished_ts") is not None:
        events.append(_event(run["finished_ts"], f"run.{str(run['state']).lower()}"))
    return sorted(events, key=lambda event: event["ts"])


def _event(ts: datetime, event: str, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "event": event, **fields}
