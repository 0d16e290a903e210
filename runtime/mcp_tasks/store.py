"""Storage of durable MCP tasks: each function takes a connection and never commits."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from runtime.store import Connection, fetch_all, fetch_one, load_queries

QUERIES = load_queries(Path(__file__).resolve().with_name("queries.sql"))


class Owner(msgspec.Struct, frozen=True, kw_only=True):
    """Whom a task is bound to: the verified host, user, subject and client principal."""

    host_id: str
    user_id: str
    end_user_subject: str
    principal_subject: str

    def params(self) -> dict[str, Any]:
        """The binding's query parameters."""
        return msgspec.structs.asdict(self)


class TaskRow(msgspec.Struct, frozen=True, kw_only=True):
    """One task: its handle, the run it follows, its revision, creation and time to live."""

    task_id: str
    process_id: str
    era: str
    created_ts: datetime
    ttl_ms: int | None
    expires_ts: datetime | None
    expired: bool | None


class Assignment(msgspec.Struct, frozen=True, kw_only=True):
    """An open human task of a run and whom it waits for."""

    task_id: str
    assignee: str
    assignee_kind: str


async def insert_task(
    conn: Connection, owner: Owner, task_id: str, process_id: str, era: str, ttl_ms: int | None
) -> TaskRow:
    """Create a task handle on a committed run."""
    params = owner.params() | {
        "task_id": task_id,
        "process_id": process_id,
        "era": era,
        "ttl_ms": ttl_ms,
    }
    row = await fetch_one(conn, QUERIES["insert_task"], params, TaskRow)
    assert row is not None  # INSERT ... RETURNING always returns the row
    return row


async def select_task(conn: Connection, owner: Owner, task_id: str) -> TaskRow | None:
    """The caller's task with this id, or None (unknown, another's or another host's)."""
    params = owner.params() | {"task_id": task_id}
    return await fetch_one(conn, QUERIES["select_task"], params, TaskRow)


async def list_tasks(
    conn: Connection,
    owner: Owner,
    era: str,
    after: tuple[datetime, str] | None,
    limit: int,
) -> list[TaskRow]:
    """The caller's live tasks of one revision, oldest first, after the cursor."""
    params = owner.params() | {
        "era": era,
        "after_created": None if after is None else after[0],
        "after_task": None if after is None else after[1],
        "limit": limit,
    }
    return await fetch_all(conn, QUERIES["list_tasks"], params, TaskRow)


async def open_assignments(conn: Connection, host_id: str, process_id: str) -> list[Assignment]:
    """Whom a run's open human tasks wait for, in task order."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_all(conn, QUERIES["open_assignments"], params, Assignment)
