"""Storage helpers of compensation: each takes a connection and never commits."""

from __future__ import annotations

from typing import Any

import msgspec

from runtime.execution.store import QUERIES
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.models import EffectState, LeaseState
from runtime.scheduler.store.sql import jsonb
from runtime.store import Connection, fetch_one

CompensationState = str  # running | completed | failed


class CompensationRecord(msgspec.Struct, frozen=True):
    """A compensated run's record: the run executing it, its state and its steps in order."""

    compensation_process_id: str
    state: CompensationState
    steps: list[dict[str, Any]]


class CompensatedStep(msgspec.Struct, frozen=True):
    """A ledgered write of the compensated run, with its compensation mark."""

    effect_state: EffectState
    output: Any
    compensation: dict[str, Any] | None


class _Recorded(msgspec.Struct, frozen=True):
    state: CompensationState


class _Retried(msgspec.Struct, frozen=True):
    retried: str | None


async def select_compensation(
    conn: Connection, host_id: str, process_id: str
) -> CompensationRecord | None:
    """The compensation record of a run, or None when it needed none."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, QUERIES["select_compensation"], params, CompensationRecord)


async def select_compensated_step(
    conn: Connection, host_id: str, process_id: str, step_no: int
) -> CompensatedStep | None:
    """One ledgered write of the compensated run."""
    params = {"host_id": host_id, "process_id": process_id, "step_no": step_no}
    return await fetch_one(conn, QUERIES["select_compensated_step"], params, CompensatedStep)


async def record_step(
    conn: Connection,
    lease: LeaseState,
    compensated_id: str,
    index: int,
    step: dict[str, Any],
    state: CompensationState,
) -> None:
    """Replace step index of the record and set its state, fenced. Raises LeaseLost."""
    params = lease.fence() | {
        "process_id": lease.process_id,
        "compensated_id": compensated_id,
        "index": index,
        "step": jsonb(step),
        "state": state,
    }
    if await fetch_one(conn, QUERIES["record_compensation_step"], params, _Recorded) is None:
        raise LeaseLost(lease.task_id, "record_compensation_step")


async def retry_compensation(conn: Connection, host_id: str, process_id: str) -> str | None:
    """Start a failed compensation again; the new compensation run's id, None if none failed."""
    params = {"host_id": host_id, "process_id": process_id}
    row = await fetch_one(conn, QUERIES["retry_compensation"], params, _Retried)
    return None if row is None else row.retried
