"""Run inspection for operators: list a host's runs, show one run with its tasks."""

from __future__ import annotations

import uuid
from typing import Any

from runtime.errors import input_invalid
from runtime.scheduler.service import get_process
from runtime.scheduler.store import inspection as store
from runtime.store import Database

RUN_STATES = ("ACCEPTED", "RUNNING", "WAITING", "COMPLETED", "FAILED", "CANCELLED")
MAX_LISTED = 1000


def _uuid(value: str, name: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise input_invalid(f"{name} must be a UUID") from None


async def list_runs(
    db: Database, host_id: str, *, state: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """A host's runs, newest first; state narrows them to one run state."""
    if state is not None and state not in RUN_STATES:
        raise input_invalid(f"state must be one of {', '.join(RUN_STATES)}")
    if not 0 < limit <= MAX_LISTED:
        raise input_invalid(f"limit must be between 1 and {MAX_LISTED}")
    async with db.transaction(read_only=True) as conn:
        return await store.select_runs(conn, _uuid(host_id, "host"), state, limit)


async def show_run(db: Database, host_id: str, process_id: str) -> dict[str, Any] | None:
    """One run (state, effect state, budget left, result, error) with its tasks, or None."""
    host, process = _uuid(host_id, "host"), _uuid(process_id, "run id")
    run = await get_process(db, host, process)
    if run is None:
        return None
    async with db.transaction(read_only=True) as conn:
        tasks = await store.select_tasks(conn, host, process)
    return {**run, "tasks": tasks}
