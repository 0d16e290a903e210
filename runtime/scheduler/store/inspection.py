"""Read-only store queries of run inspection: runs, tasks, effect steps and a run's origin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from generated.models import RuntimeBounds
from runtime.store import Connection, fetch_one, load_queries

INSPECTION_QUERIES_PATH = Path(__file__).resolve().parent / "inspection.sql"
INSPECTION_QUERIES = load_queries(INSPECTION_QUERIES_PATH)


class RunOrigin(msgspec.Struct, frozen=True):
    """How a run was started (invoke or start), through which Tool, with its runtime bounds."""

    operation: str
    tool_id: str | None
    tool_name: str | None
    runtime_bounds: RuntimeBounds | None


async def select_runs(
    conn: Connection, host_id: str, state: str | None, tool: str | None, limit: int
) -> list[dict[str, Any]]:
    """A host's runs, newest first (optionally only those in state, or of one Tool)."""
    params = {"host_id": host_id, "state": state, "tool": tool, "limit": limit}
    cursor = await conn.execute(INSPECTION_QUERIES["list_runs"], params)
    return [dict(row) for row in await cursor.fetchall()]


async def select_tasks(conn: Connection, host_id: str, process_id: str) -> list[dict[str, Any]]:
    """The tasks of one run in step order."""
    params = {"host_id": host_id, "process_id": process_id}
    cursor = await conn.execute(INSPECTION_QUERIES["list_tasks"], params)
    return [dict(row) for row in await cursor.fetchall()]


async def select_steps(conn: Connection, host_id: str, process_id: str) -> list[dict[str, Any]]:
    """The effect ledger of one run in step order."""
    params = {"host_id": host_id, "process_id": process_id}
    cursor = await conn.execute(INSPECTION_QUERIES["list_steps"], params)
    return [dict(row) for row in await cursor.fetchall()]


async def select_origin(conn: Connection, host_id: str, process_id: str) -> RunOrigin | None:
    """The invocation record of one run (operation, Tool, runtime bounds), if it has one."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, INSPECTION_QUERIES["run_origin"], params, RunOrigin)
