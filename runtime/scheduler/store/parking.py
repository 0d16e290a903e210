"""Store queries of runs parked on a human task (migration 0080 parks them on insert)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from runtime.store import Connection, fetch_one, load_queries

PARKING_QUERIES_PATH = Path(__file__).resolve().parent / "parking.sql"
PARKING_QUERIES = load_queries(PARKING_QUERIES_PATH)


class WokenTask(msgspec.Struct, frozen=True):
    """A parked task made available: its id and execution class."""

    task_id: str
    execution_class: str


async def wake_parked_task(
    conn: Connection, host_id: str, process_id: str, human_task_id: str
) -> tuple[str, str] | None:
    """The parked task made available now (task id, execution class), or None if none waits."""
    params = {"host_id": host_id, "process_id": process_id, "human_task_id": human_task_id}
    row = await fetch_one(conn, PARKING_QUERIES["wake_parked_task"], params, WokenTask)
    return None if row is None else (row.task_id, row.execution_class)


async def resume_waiting_run(conn: Connection, host_id: str, process_id: str) -> None:
    """A WAITING run becomes RUNNING (its parked task was claimed)."""
    params = {"host_id": host_id, "process_id": process_id}
    await conn.execute(PARKING_QUERIES["resume_waiting_run"], params)
