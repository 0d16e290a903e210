"""Durable MCP tasks (issue 35): handles on workflow_start runs, kept as PostgreSQL rows.

A task is a row (migration 0100) keyed by an unguessable id, bound to the verified host, user,
subject and client principal that created it, pointing at its run. What a task *is* at any
moment (working, waiting for input, finished) is read from the run when asked: nothing polls
a task and nothing holds one in memory, so any replica answers for any task and 10,000 open
tasks cost 10,000 rows. The protocol shapes of both MCP revisions live in runtime.mcp.tasks.
"""

from __future__ import annotations

import base64
import secrets
from datetime import UTC, datetime

from runtime.invocation.rules import principal_of
from runtime.mcp_tasks import store
from runtime.mcp_tasks.store import Assignment, Owner, TaskRow
from runtime.security import InvocationContext
from runtime.store import Database

# 256 random bits: the id is a bearer handle (the extension's "task ID unguessability").
_ID_BYTES = 32
_ID_PREFIX = "tsk_"
_ID_LENGTHS = range(32, 65)


class TaskUnknown(Exception):
    """No task with this id is the caller's: unknown, another caller's or another host's."""


class TaskExpired(Exception):
    """The caller's task outlived its time to live."""


def new_task_id() -> str:
    """A fresh unguessable task id."""
    return _ID_PREFIX + secrets.token_urlsafe(_ID_BYTES)


def owner_of(ctx: InvocationContext) -> Owner:
    """The identity a task of this caller is bound to."""
    return Owner(
        host_id=ctx.host_id,
        user_id=ctx.user_id,
        end_user_subject=ctx.subject,
        principal_subject=principal_of(ctx),
    )


async def create(
    db: Database, ctx: InvocationContext, process_id: str, era: str, ttl_ms: int | None
) -> TaskRow:
    """Store a task on a committed run; it is readable by any replica once this returns."""
    async with db.transaction() as conn:
        return await store.insert_task(conn, owner_of(ctx), new_task_id(), process_id, era, ttl_ms)


async def find(db: Database, ctx: InvocationContext, task_id: object) -> TaskRow:
    """The caller's live task; TaskUnknown or TaskExpired otherwise."""
    if not isinstance(task_id, str) or len(task_id) not in _ID_LENGTHS:
        raise TaskUnknown
    async with db.transaction(read_only=True) as conn:
        row = await store.select_task(conn, owner_of(ctx), task_id)
    if row is None:
        raise TaskUnknown
    if row.expired:
        raise TaskExpired
    return row


async def list_own(
    db: Database, ctx: InvocationContext, era: str, cursor: object, limit: int
) -> tuple[list[TaskRow], str | None]:
    """One page of the caller's live tasks of a revision and the next page's cursor."""
    after = _decode_cursor(cursor) if cursor is not None else None
    async with db.transaction(read_only=True) as conn:
        rows = await store.list_tasks(conn, owner_of(ctx), era, after, limit + 1)
    page = rows[:limit]
    return page, (_encode_cursor(page[-1]) if len(rows) > limit else None)


async def waiting_on(db: Database, host_id: str, process_id: str) -> list[Assignment]:
    """Whom a run's open human tasks wait for."""
    async with db.transaction(read_only=True) as conn:
        return await store.open_assignments(conn, host_id, process_id)


class BadCursor(Exception):
    """A tasks/list cursor this server did not hand out."""


def _encode_cursor(row: TaskRow) -> str:
    text = f"{row.created_ts.isoformat()}|{row.task_id}"
    return base64.urlsafe_b64encode(text.encode()).decode()


def _decode_cursor(cursor: object) -> tuple[datetime, str]:
    if not isinstance(cursor, str):
        raise BadCursor
    try:
        created, task_id = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        return datetime.fromisoformat(created).astimezone(UTC), task_id
    except (ValueError, UnicodeDecodeError):
        raise BadCursor from None


__all__ = [
    "Assignment",
    "BadCursor",
    "Owner",
    "TaskExpired",
    "TaskRow",
    "TaskUnknown",
    "create",
    "find",
    "list_own",
    "new_task_id",
    "owner_of",
    "waiting_on",
]
