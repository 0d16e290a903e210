"""Storage helpers of human tasks: each takes a connection and never commits.

A task leaves 'open' once: 'answered' (``answer_task``), 'timedOut' (``time_out_task``), or
'cancelled' when its run ends, which no statement here writes: migration 0081's trigger
``workflow_process_close_human_tasks`` (AFTER UPDATE OF state ON workflow_process, function
``workflow_close_human_tasks_of_ended_run``) closes a run's open tasks in the commit that ends
it, whoever ends it (the caller's cancel, the deadline sweep, the executor). It fires only for
a run leaving WAITING or an unbound (workflow_start) run. ``wake_parked_task`` and
``resume_waiting_run`` write a parked run's scheduler rows (runtime.human_tasks.resume).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
from psycopg.types.json import Jsonb

from runtime.store import Connection, fetch_all, fetch_one, load_queries

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


class NewHumanTask(msgspec.Struct, frozen=True, kw_only=True):
    """insert_human_task's parameters: a run's ask, its question and assignee, its timeout."""

    host_id: str
    process_id: str
    position: int
    ask_key: str
    task_name: str
    wf_def_id: str | None
    question: dict[str, Any]
    assignee_user_id: str | None
    assignee_role_id: str | None
    assignee_position_id: str | None
    timeout_ms: int | None


class TaskAt(msgspec.Struct, frozen=True, kw_only=True):
    """The human task of a run's ask: its state, due time (due: passed), answer and question."""

    task_id: str
    state: str
    due_ts: datetime | None
    output: Any
    question: dict[str, Any]
    due: bool | None


class KeyedTask(msgspec.Struct, frozen=True, kw_only=True):
    """One of the human tasks a top-level task opened: its ask's key, state and answer."""

    task_id: str
    ask_key: str
    state: str
    output: Any
    question: dict[str, Any]
    due: bool | None


class AssignedTask(msgspec.Struct, frozen=True, kw_only=True):
    """A task as its assignee sees it (operation_id, answer_digest: only when read to answer)."""

    task_id: str
    process_id: str
    task_name: str
    wf_def_id: str | None
    question: dict[str, Any]
    state: str
    due_ts: datetime | None
    created_ts: datetime
    output: Any
    operation_id: str | None = None
    answer_digest: str | None = None


class TaskAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """answer_task's parameters but the task: the output and who gave it, with which call."""

    output: dict[str, Any]
    answered_by: str
    operation_id: str
    answer_digest: str


class RunHumanTask(msgspec.Struct, frozen=True, kw_only=True):
    """A human task of one run for operators: never its answer's value."""

    task_id: str
    position: int
    task_name: str
    state: str
    assignee: str
    assignee_kind: str
    created_ts: datetime
    due_ts: datetime | None
    answered_by: str | None
    answered_ts: datetime | None


class WokenTask(msgspec.Struct, frozen=True):
    """A parked task made available: its id and execution class."""

    task_id: str
    execution_class: str


class _TaskId(msgspec.Struct, frozen=True):
    task_id: str


class _Count(msgspec.Struct, frozen=True):
    open: int


async def insert_task(conn: Connection, task: NewHumanTask) -> None:
    """Open a human task (a repeat for the same ask is a no-op)."""
    params = msgspec.structs.asdict(task) | {"question": Jsonb(task.question)}
    await conn.execute(QUERIES["insert_human_task"], params)


async def select_task_at(
    conn: Connection, host_id: str, process_id: str, position: int, ask_key: str
) -> TaskAt | None:
    """The human task of one ask (key) of the top-level task at position, locked; or None."""
    params = {"host_id": host_id, "process_id": process_id, "position": position}
    return await fetch_one(conn, QUERIES["select_task_at"], params | {"ask_key": ask_key}, TaskAt)


async def select_tasks_at(
    conn: Connection, host_id: str, process_id: str, position: int
) -> list[KeyedTask]:
    """Every human task the top-level task at position opened, locked, oldest first."""
    params = {"host_id": host_id, "process_id": process_id, "position": position}
    return await fetch_all(conn, QUERIES["select_tasks_at"], params, KeyedTask)


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
) -> list[AssignedTask]:
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
    return await fetch_all(conn, QUERIES["list_assigned_tasks"], params, AssignedTask)


async def select_assigned(
    conn: Connection, host_id: str, task_id: str, who: Assignee
) -> AssignedTask | None:
    """One task the caller is an assignee of, locked; None otherwise (however it exists)."""
    params = {"host_id": host_id, "task_id": task_id, **who.params()}
    return await fetch_one(conn, QUERIES["select_assigned_task"], params, AssignedTask)


async def answer_task(conn: Connection, host_id: str, task_id: str, answer: TaskAnswer) -> None:
    """Record an open task's answer (output, answered_by, operation_id, answer_digest)."""
    params = msgspec.structs.asdict(answer) | {"output": Jsonb(answer.output)}
    await conn.execute(QUERIES["answer_task"], params | {"host_id": host_id, "task_id": task_id})


async def open_task_ids(conn: Connection, host_id: str, process_id: str) -> list[str]:
    """The open human tasks of one run."""
    params = {"host_id": host_id, "process_id": process_id}
    rows = await fetch_all(conn, QUERIES["open_task_ids"], params, _TaskId)
    return [row.task_id for row in rows]


async def run_tasks(conn: Connection, host_id: str, process_id: str) -> list[RunHumanTask]:
    """Every human task of one run (any state), for operators; never the answers' values."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_all(conn, QUERIES["run_tasks"], params, RunHumanTask)


async def count_open(conn: Connection) -> int:
    """How many human tasks are open on every host (a metric sample)."""
    row = await fetch_one(conn, QUERIES["count_open_tasks"], {}, _Count)
    return 0 if row is None else row.open


async def wake_parked_task(
    conn: Connection, host_id: str, process_id: str, human_task_id: str
) -> tuple[str, str] | None:
    """The parked task made available now (task id, execution class), or None if none waits."""
    params = {"host_id": host_id, "process_id": process_id, "human_task_id": human_task_id}
    row = await fetch_one(conn, QUERIES["wake_parked_task"], params, WokenTask)
    return None if row is None else (row.task_id, row.execution_class)


async def resume_waiting_run(conn: Connection, host_id: str, process_id: str) -> None:
    """A WAITING run becomes RUNNING (its parked task was claimed)."""
    params = {"host_id": host_id, "process_id": process_id}
    await conn.execute(QUERIES["resume_waiting_run"], params)


def _jsonb(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)
