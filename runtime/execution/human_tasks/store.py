"""Storage helpers of human tasks: each takes a connection and never commits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from runtime.store import Connection, load_queries

QUERIES = load_queries(Path(__file__).resolve().with_name("queries.sql"))


@dataclass(frozen=True)
class Assignee:
    """Who asks: the verified caller's user id, roles and positions."""

    user_id: str
    roles: list[str]
    positions: list[str]

    def params(self) -> dict[str, Any]:
        """The assignee match's query parameters."""
        return {"user_id": self.user_id, "roles": self.roles, "positions": self.positions}


async def insert_task(conn: Connection, row: dict[str, Any]) -> None:
    """Open a human task (a repeat for the same ask is a no-op)."""
    await conn.execute(QUERIES["insert_human_task"], {**row, "question": Jsonb(row["question"])})


async def select_task_at(
    conn: Connection, host_id: str, process_id: str, position: int, ask_key: str
) -> dict[str, Any] | None:
    """The human task of one ask (key) of the top-level task at position, locked; or None."""
    params = {"host_id": host_id, "process_id": process_id, "position": position}
    cursor = await conn.execute(QUERIES["select_task_at"], {**params, "ask_key": ask_key})
    row = await cursor.fetchone()
    return None if row is None else dict(row)


async def select_tasks_at(
    conn: Connection, host_id: str, process_id: str, position: int
) -> list[dict[str, Any]]:
    """Every human task the top-level task at position opened, locked, oldest first."""
    params = {"host_id": host_id, "process_id": process_id, "position": position}
    cursor = await conn.execute(QUERIES["select_tasks_at"], params)
    return [dict(row) for row in await cursor.fetchall()]


async def time_out_task(conn: Connection, host_id: str, task_id: str, output: Any) -> None:
    """Close an open task at its due time with output (None: the ask fails)."""
    params = {"host_id": host_id, "task_id": task_id, "output": _jsonb(output)}
    await conn.execute(QUERIES["time_out_task"], params)


async def list_assigned(
    conn: Connection,
    host_id: str,
    who: Assignee,
    *,
    state: str,
    process_id: str | None,
    after: tuple[datetime, str] | None,
    limit: int,
) -> list[dict[str, Any]]:
    """The caller's tasks in one state, oldest first, after the cursor."""
    params = {
        "host_id": host_id,
        "state": state,
        "process_id": process_id,
        "after_created": None if after is None else after[0],
        "after_task": None if after is None else after[1],
        "limit": limit,
        **who.params(),
    }
    cursor = await conn.execute(QUERIES["list_assigned_tasks"], params)
    return [dict(row) for row in await cursor.fetchall()]


async def select_assigned(
    conn: Connection, host_id: str, task_id: str, who: Assignee
) -> dict[str, Any] | None:
    """One task the caller is an assignee of, locked; None otherwise (however it exists)."""
    params = {"host_id": host_id, "task_id": task_id, **who.params()}
    cursor = await conn.execute(QUERIES["select_assigned_task"], params)
    row = await cursor.fetchone()
    return None if row is None else dict(row)


async def answer_task(conn: Connection, host_id: str, task_id: str, answer: dict[str, Any]) -> None:
    """Record an open task's answer (output, answered_by, operation_id, answer_digest)."""
    params = {"host_id": host_id, "task_id": task_id, **answer, "output": Jsonb(answer["output"])}
    await conn.execute(QUERIES["answer_task"], params)


async def open_task_ids(conn: Connection, host_id: str, process_id: str) -> list[str]:
    """The open human tasks of one run."""
    params = {"host_id": host_id, "process_id": process_id}
    cursor = await conn.execute(QUERIES["open_task_ids"], params)
    return [row["task_id"] for row in await cursor.fetchall()]


async def run_tasks(conn: Connection, host_id: str, process_id: str) -> list[dict[str, Any]]:
    """Every human task of one run (any state), for operators; never the answers' values."""
    params = {"host_id": host_id, "process_id": process_id}
    cursor = await conn.execute(QUERIES["run_tasks"], params)
    return [dict(row) for row in await cursor.fetchall()]


async def count_open(conn: Connection) -> int:
    """How many human tasks are open on every host (a metric sample)."""
    cursor = await conn.execute(QUERIES["count_open_tasks"])
    row = await cursor.fetchone()
    return 0 if row is None else int(row["open"])


def _jsonb(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)
