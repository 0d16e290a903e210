"""Storage helpers of the Lightspeed inbox: each takes a connection and never commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from psycopg.types.json import Jsonb

from runtime.store import Connection, fetch_all, fetch_one, load_queries

QUERIES = load_queries(Path(__file__).resolve().with_name("queries.sql"))


class Emission(msgspec.Struct, frozen=True, kw_only=True):
    """One inbox row to record: the emission, its outcome and (for an invocation) its reply."""

    host_id: str
    emission_id: str
    kind: str
    invocation_id: str
    outcome: dict[str, Any]
    process_id: str | None = None
    universe_id: str | None = None
    holder_workflow_id: str | None = None
    promise_id: str | None = None
    producer_workflow_id: str | None = None
    reply_state: str = "none"


class DueReply(msgspec.Struct, frozen=True, kw_only=True):
    """A reply the job owes: where it goes, as whom, and what was already decided."""

    host_id: str
    emission_id: str
    process_id: str
    universe_id: str
    holder_workflow_id: str
    promise_id: str
    producer_workflow_id: str
    reply_emission_id: str | None
    resolution: dict[str, Any] | None
    reply_attempts: int


class RecoveredReply(msgspec.Struct, frozen=True, kw_only=True):
    """An execution's reply as recovery reads it."""

    promise_id: str
    reply_state: str
    resolution: dict[str, Any] | None


class Receiver(msgspec.Struct, frozen=True, kw_only=True):
    """A Tool whose active binding serves a Lightspeed tool id (binding.lightspeedReceiver)."""

    stable_tool_ref: str
    universes: list[str]
    receiver_workflow_id: str


class _Outcome(msgspec.Struct, frozen=True):
    outcome: dict[str, Any]


class _Intent(msgspec.Struct, frozen=True):
    resolution: dict[str, Any]
    reply_emission_id: str


class _Process(msgspec.Struct, frozen=True):
    process_id: str | None


async def select_outcome(conn: Connection, host_id: str, emission_id: str) -> dict[str, Any] | None:
    """The recorded outcome of an emission this host acted on, or None."""
    params = {"host_id": host_id, "emission_id": emission_id}
    row = await fetch_one(conn, QUERIES["select_emission"], params, _Outcome)
    return None if row is None else row.outcome


async def insert_emission(conn: Connection, emission: Emission) -> dict[str, Any] | None:
    """Record an emission; None when a concurrent delivery recorded it first."""
    params = msgspec.structs.asdict(emission) | {"outcome": Jsonb(emission.outcome)}
    row = await fetch_one(conn, QUERIES["insert_emission"], params, _Outcome)
    return None if row is None else row.outcome


async def cancel_reply(conn: Connection, host_id: str, invocation_id: str) -> str | None:
    """Mark an invocation's pending reply cancelled; its run's id (None: nothing pending)."""
    params = {"host_id": host_id, "invocation_id": invocation_id}
    row = await fetch_one(conn, QUERIES["cancel_reply"], params, _Process)
    return None if row is None else row.process_id


async def select_due_replies(conn: Connection, batch: int) -> list[DueReply]:
    """Pending replies whose next attempt is due."""
    return await fetch_all(conn, QUERIES["select_due_replies"], {"batch": batch}, DueReply)


async def record_reply_intent(
    conn: Connection, reply: DueReply, resolution: dict[str, Any], reply_emission_id: str
) -> tuple[dict[str, Any], str] | None:
    """Keep the reply's resolution and id (the first ones win); None if no longer pending."""
    params = {
        "host_id": reply.host_id,
        "emission_id": reply.emission_id,
        "resolution": Jsonb(resolution),
        "reply_emission_id": reply_emission_id,
    }
    row = await fetch_one(conn, QUERIES["record_reply_intent"], params, _Intent)
    return None if row is None else (row.resolution, row.reply_emission_id)


async def record_reply_sent(conn: Connection, host_id: str, emission_id: str) -> None:
    """The holder took the reply."""
    params = {"host_id": host_id, "emission_id": emission_id}
    await conn.execute(QUERIES["record_reply_sent"], params)


async def record_reply_failed(
    conn: Connection, host_id: str, emission_id: str, pause_ms: int, max_attempts: int
) -> None:
    """One failed attempt (abandoned after max_attempts)."""
    params = {
        "host_id": host_id,
        "emission_id": emission_id,
        "pause_ms": pause_ms,
        "max_attempts": max_attempts,
    }
    await conn.execute(QUERIES["record_reply_failed"], params)


async def select_recovery(
    conn: Connection, host_id: str, producer_workflow_id: str
) -> list[RecoveredReply]:
    """The replies of one producer id (an execution or an authorized receiver)."""
    params = {"host_id": host_id, "producer_workflow_id": producer_workflow_id}
    return await fetch_all(conn, QUERIES["select_recovery"], params, RecoveredReply)


async def select_receivers(conn: Connection, host_id: str, tool_id: str) -> list[Receiver]:
    """The host's active Tools serving Lightspeed tool_id (at most two: one is the answer)."""
    params = {"host_id": host_id, "tool_id": tool_id}
    return await fetch_all(conn, QUERIES["select_receivers"], params, Receiver)


class _EmissionId(msgspec.Struct, frozen=True):
    emission_id: str


async def cancellation_arrived(conn: Connection, host_id: str, invocation_id: str) -> bool:
    """Whether the session already cancelled this invocation's reply Promise."""
    params = {"host_id": host_id, "invocation_id": invocation_id}
    return await fetch_one(conn, QUERIES["select_cancelled"], params, _EmissionId) is not None
