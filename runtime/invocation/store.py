"""Storage helpers of invocation admission: each takes a connection and never commits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from runtime.security import SealedSecret
from runtime.store import Connection, load_queries

QUERIES = load_queries(Path(__file__).resolve().with_name("queries.sql"))


@dataclass(frozen=True)
class Claim:
    """What the idempotency claim decided and which run it names."""

    outcome: str  # accepted | attach | replay | conflict
    process_id: str


@dataclass(frozen=True)
class AdmissionCounts:
    """A Tool's live runs and starts in the last minute, overall and for one end user."""

    live: int
    live_for_user: int
    recent: int
    recent_for_user: int
    oldest_recent: datetime | None
    oldest_recent_for_user: datetime | None
    next_live_deadline: datetime | None
    counted_at: datetime


async def _one(conn: Connection, query: str, params: dict[str, Any]) -> dict[str, Any] | None:
    cursor = await conn.execute(query, params)
    row: dict[str, Any] | None = await cursor.fetchone()
    return row


async def lock_active_revision(
    conn: Connection, host_id: str, tool_id: str
) -> dict[str, Any] | None:
    """The Tool head (locked FOR SHARE) joined with its active revision, or None."""
    cursor = await conn.execute(
        QUERIES["lock_active_revision"], {"host_id": host_id, "tool_id": tool_id}
    )
    row: dict[str, Any] | None = await cursor.fetchone()
    return row


async def select_last_closed_status(conn: Connection, host_id: str, tool_id: str) -> str | None:
    """The status of the Tool's most recently closed revision, if any."""
    cursor = await conn.execute(
        QUERIES["select_last_closed_status"], {"host_id": host_id, "tool_id": tool_id}
    )
    row = await cursor.fetchone()
    return None if row is None else str(row["revision_status"])


async def lock_version_for_share(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> dict[str, Any] | None:
    """A published version (status, digest, document) locked FOR SHARE, or None."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    return await _one(conn, QUERIES["lock_version_for_share"], params)


async def select_head(conn: Connection, host_id: str, wf_def_id: str) -> dict[str, Any] | None:
    """A saved definition head, or None."""
    return await _one(conn, QUERIES["select_head"], {"host_id": host_id, "wf_def_id": wf_def_id})


async def claim_idempotency(conn: Connection, params: dict[str, Any]) -> Claim:
    """Reserve or judge one idempotency scope through workflow_claim_idempotency_v2."""
    row = await _one(conn, QUERIES["claim_idempotency"], params)
    assert row is not None  # the function always returns one row
    return Claim(str(row["outcome"]), str(row["process_id"]))


async def lock_tool_admission(conn: Connection, host_id: str, tool_id: str) -> None:
    """Take the per-Tool admission lock until the transaction ends."""
    await conn.execute(QUERIES["lock_tool_admission"], {"host_id": host_id, "tool_id": tool_id})


async def count_tool_admissions(
    conn: Connection, host_id: str, tool_id: str, subject: str
) -> AdmissionCounts:
    """Count the Tool's live runs and recent starts (call under the admission lock)."""
    params = {"host_id": host_id, "tool_id": tool_id, "subject": subject}
    row = await _one(conn, QUERIES["count_tool_admissions"], params)
    assert row is not None  # an aggregate always returns one row
    return AdmissionCounts(**row)


async def insert_invocation(conn: Connection, row: dict[str, Any]) -> None:
    """Record who admitted a run and through what."""
    await conn.execute(QUERIES["insert_invocation"], row)


async def replace_credential(
    conn: Connection,
    host_id: str,
    process_id: str,
    sealed: SealedSecret,
    token_expires_ts: datetime,
) -> bool:
    """Keep the later-expiring token of a live run; True when replaced."""
    cursor = await conn.execute(
        QUERIES["replace_credential"],
        {
            "host_id": host_id,
            "process_id": process_id,
            "key_id": sealed.key_id,
            "nonce": sealed.nonce,
            "ciphertext": sealed.ciphertext,
            "token_expires_ts": token_expires_ts,
        },
    )
    return cursor.rowcount > 0


async def select_owned_run(
    conn: Connection, host_id: str, process_id: str
) -> dict[str, Any] | None:
    """A run admitted here with its owner and state, or None."""
    return await _one(
        conn, QUERIES["select_owned_run"], {"host_id": host_id, "process_id": process_id}
    )


async def select_missing_evidence(conn: Connection, host_id: str, binding_id: str) -> str | None:
    """The name of a write task of the revision that lacks its evidence row, or None."""
    row = await _one(
        conn, QUERIES["select_missing_evidence"], {"host_id": host_id, "binding_id": binding_id}
    )
    return None if row is None else str(row["task_name"])


async def insert_action_authority(conn: Connection, row: dict[str, Any]) -> None:
    """Write a run's action authority row (once, in its admission transaction)."""
    await conn.execute(QUERIES["insert_action_authority"], row)


async def sweep_retention(conn: Connection, retention_s: float, batch: int) -> tuple[int, int]:
    """Delete expired reservations and old finished runs; (reservations, runs) removed."""
    row = await _one(conn, QUERIES["sweep_retention"], {"retention_s": retention_s, "batch": batch})
    assert row is not None  # the function always returns one row
    return int(row["reservations"]), int(row["runs"])
