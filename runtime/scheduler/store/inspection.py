"""Read-only store queries of run inspection: a host's runs and one run's tasks."""

from __future__ import annotations

from typing import Any

from runtime.scheduler.store.sql import QUERIES
from runtime.store import Connection


async def select_runs(
    conn: Connection, host_id: str, state: str | None, limit: int
) -> list[dict[str, Any]]:
    """A host's runs, newest first (optionally only those in state)."""
    params = {"host_id": host_id, "state": state, "limit": limit}
    cursor = await conn.execute(QUERIES["list_runs"], params)
    return [dict(row) for row in await cursor.fetchall()]


async def select_tasks(conn: Connection, host_id: str, process_id: str) -> list[dict[str, Any]]:
    """The tasks of one run in step order."""
    params = {"host_id": host_id, "process_id": process_id}
    cursor = await conn.execute(QUERIES["list_tasks"], params)
    return [dict(row) for row in await cursor.fetchall()]
