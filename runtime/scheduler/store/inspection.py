"""Read-only store queries of run inspection: runs, tasks, effect steps and a run's origin."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from generated.models import RuntimeBounds
from runtime.scheduler.models import CancellationPolicy, EffectState, ExecutionClass, RunState
from runtime.store import Connection, fetch_all, fetch_one, load_queries

INSPECTION_QUERIES_PATH = Path(__file__).resolve().parent / "inspection.sql"
INSPECTION_QUERIES = load_queries(INSPECTION_QUERIES_PATH)


class RunOrigin(msgspec.Struct, frozen=True):
    """How a run was started (invoke or start), through which Tool, with its runtime bounds."""

    operation: str
    tool_id: str | None
    tool_name: str | None
    runtime_bounds: RuntimeBounds | None


class ListedRun(msgspec.Struct, frozen=True, kw_only=True):
    """One run of a host's list: its states, how it was started and by which Tool, its times."""

    process_id: str
    state: RunState
    execution_class: ExecutionClass
    effect_state: EffectState
    cancellation_policy: CancellationPolicy
    binding_id: str | None
    operation: str | None
    tool_id: str | None
    tool_name: str | None
    created_ts: datetime
    finished_ts: datetime | None
    deadline_ts: datetime
    # The state of the run's compensation (None: it has none).
    compensation: str | None = None


class ListedTask(msgspec.Struct, frozen=True, kw_only=True):
    """One task of a run: its step, state, attempts, last worker and error."""

    task_id: str
    step_no: int
    kind: str
    state: str
    execution_class: ExecutionClass
    attempts: int
    worker_id: str | None
    error: dict[str, Any] | None
    created_ts: datetime
    updated_ts: datetime


class ListedStep(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a run's effect ledger: its effect state and when it changed."""

    step_no: int
    effect_state: EffectState
    possible_ts: datetime
    confirmed_ts: datetime | None


async def select_runs(
    conn: Connection,
    host_id: str,
    state: str | None,
    tool: str | None,
    limit: int,
    compensation: str | None = None,
) -> list[ListedRun]:
    """A host's runs, newest first (optionally only those in state, of one Tool, or whose
    compensation is in one state)."""
    params = {
        "host_id": host_id,
        "state": state,
        "tool": tool,
        "limit": limit,
        "compensation": compensation,
    }
    return await fetch_all(conn, INSPECTION_QUERIES["list_runs"], params, ListedRun)


async def select_tasks(conn: Connection, host_id: str, process_id: str) -> list[ListedTask]:
    """The tasks of one run in step order."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_all(conn, INSPECTION_QUERIES["list_tasks"], params, ListedTask)


async def select_steps(conn: Connection, host_id: str, process_id: str) -> list[ListedStep]:
    """The effect ledger of one run in step order."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_all(conn, INSPECTION_QUERIES["list_steps"], params, ListedStep)


async def select_origin(conn: Connection, host_id: str, process_id: str) -> RunOrigin | None:
    """The invocation record of one run (operation, Tool, runtime bounds), if it has one."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, INSPECTION_QUERIES["run_origin"], params, RunOrigin)
