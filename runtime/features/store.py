"""Storage of the feature ledger: each helper takes a connection inside the caller's
transaction and never commits (queries.sql beside it)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
from psycopg.types.json import Jsonb

from runtime.features.findings import Finding
from runtime.store import Connection, fetch_one, json_param, load_queries

QUERIES = load_queries(Path(__file__).resolve().with_name("queries.sql"))


class FeatureRow(msgspec.Struct, kw_only=True):
    """A feature run row (its mutable columns are written back by update_feature)."""

    feature_run_id: str
    issue: dict[str, Any]
    scope: str
    completion_target: str
    require_design_signoff: bool
    phases: list[dict[str, Any]]
    accepted_inputs: dict[str, dict[str, str]]
    accepted_results: list[dict[str, Any]]
    state: str
    version: int
    active_stage_execution_id: str | None
    maximum_remediation_rounds: int
    maximum_turns: int
    remediation_used: dict[str, int]
    turns_used: int
    slot_generation: int
    signoff: dict[str, Any] | None
    resolution_reason: str | None
    created_ts: datetime
    updated_ts: datetime


class ClaimRow(msgspec.Struct, frozen=True, kw_only=True):
    """A stage claim row."""

    feature_run_id: str
    stage_key: str
    predecessor_version: int
    stage: dict[str, Any]
    stage_execution_id: str
    process_id: str
    wf_def_id: str
    definition_digest: str
    inputs: dict[str, dict[str, str]]
    request_digest: str
    state: str
    outcome: dict[str, Any] | None
    claimed_ts: datetime


class SlotRow(msgspec.Struct, frozen=True):
    """The host's one feature slot."""

    feature_run_id: str | None
    generation: int


class OperationRow(msgspec.Struct, frozen=True):
    """A recorded feature operation."""

    tool: str
    request_digest: str
    outcome: dict[str, Any]


class RunRow(msgspec.Struct, frozen=True):
    """A stage run's state and output."""

    state: str
    result: Any


def _key(host_id: str, feature_run_id: str) -> dict[str, Any]:
    return {"host_id": host_id, "feature_run_id": feature_run_id}


async def lock_slot(conn: Connection, host_id: str) -> SlotRow:
    """The host's slot row, created if absent, locked until the transaction ends."""
    await conn.execute(QUERIES["ensure_slot"], {"host_id": host_id})
    row = await fetch_one(conn, QUERIES["lock_slot"], {"host_id": host_id}, SlotRow)
    assert row is not None
    return row


async def select_slot(conn: Connection, host_id: str) -> SlotRow | None:
    """The host's slot row without a lock."""
    return await fetch_one(conn, QUERIES["select_slot"], {"host_id": host_id}, SlotRow)


async def take_slot(conn: Connection, host_id: str, feature_run_id: str) -> int:
    """Give the (locked, free) slot to a feature; its new reservation generation."""
    cursor = await conn.execute(QUERIES["take_slot"], _key(host_id, feature_run_id))
    row = await cursor.fetchone()
    assert row is not None
    return int(row["generation"])


async def release_slot(
    conn: Connection, host_id: str, feature_run_id: str, generation: int
) -> bool:
    """Free the slot when this feature holds it at this generation; True when freed."""
    params = _key(host_id, feature_run_id) | {"generation": generation}
    cursor = await conn.execute(QUERIES["release_slot"], params)
    return cursor.rowcount > 0


async def select_operation(
    conn: Connection, host_id: str, operation_id: str
) -> OperationRow | None:
    """A recorded operation, or None."""
    params = {"host_id": host_id, "operation_id": operation_id}
    return await fetch_one(conn, QUERIES["select_operation"], params, OperationRow)


async def insert_operation(
    conn: Connection, host_id: str, operation_id: str, tool: str, digest: str, outcome: Any
) -> None:
    """Record an operation's outcome (replayed to an identical retry)."""
    await conn.execute(
        QUERIES["insert_operation"],
        {
            "host_id": host_id,
            "operation_id": operation_id,
            "tool": tool,
            "request_digest": digest,
            "outcome": json_param(outcome),
        },
    )


async def insert_feature(conn: Connection, host_id: str, values: dict[str, Any]) -> None:
    """Write a new feature run."""
    params = {"host_id": host_id} | {
        k: Jsonb(v) if isinstance(v, dict | list) else v for k, v in values.items()
    }
    await conn.execute(QUERIES["insert_feature"], params)


async def select_feature(
    conn: Connection, host_id: str, feature_run_id: str, *, lock: bool = False
) -> FeatureRow | None:
    """A feature run of the host (locked FOR UPDATE when lock), or None."""
    query = QUERIES["lock_feature" if lock else "select_feature"]
    return await fetch_one(conn, query, _key(host_id, feature_run_id), FeatureRow)


async def update_feature(conn: Connection, host_id: str, row: FeatureRow) -> None:
    """Write back a locked feature's mutable columns."""
    await conn.execute(
        QUERIES["update_feature"],
        _key(host_id, row.feature_run_id)
        | {
            "accepted_inputs": Jsonb(row.accepted_inputs),
            "accepted_results": Jsonb(row.accepted_results),
            "state": row.state,
            "version": row.version,
            "active_stage_execution_id": row.active_stage_execution_id,
            "remediation_used": Jsonb(row.remediation_used),
            "turns_used": row.turns_used,
            "signoff": None if row.signoff is None else Jsonb(row.signoff),
            "resolution_reason": row.resolution_reason,
        },
    )


async def claim_by_transition(
    conn: Connection, host_id: str, feature_run_id: str, stage_key: str, predecessor: int
) -> ClaimRow | None:
    """The claim of one transition identity, or None."""
    params = _key(host_id, feature_run_id) | {
        "stage_key": stage_key,
        "predecessor_version": predecessor,
    }
    return await fetch_one(conn, QUERIES["select_claim_by_transition"], params, ClaimRow)


async def claim_by_execution(
    conn: Connection, host_id: str, feature_run_id: str, stage_execution_id: str
) -> ClaimRow | None:
    """The claim of one stage execution, or None."""
    params = _key(host_id, feature_run_id) | {"stage_execution_id": stage_execution_id}
    return await fetch_one(conn, QUERIES["select_claim_by_execution"], params, ClaimRow)


async def insert_claim(conn: Connection, host_id: str, values: dict[str, Any]) -> datetime:
    """Record a new active claim; its claim time."""
    params = {"host_id": host_id} | {
        k: Jsonb(v) if isinstance(v, dict | list) else v for k, v in values.items()
    }
    cursor = await conn.execute(QUERIES["insert_claim"], params)
    row = await cursor.fetchone()
    assert row is not None
    claimed: datetime = row["claimed_ts"]
    return claimed


async def settle_claim(
    conn: Connection, host_id: str, stage_execution_id: str, state: str, outcome: Any
) -> None:
    """Close a claim with its recorded outcome."""
    await conn.execute(
        QUERIES["settle_claim"],
        {
            "host_id": host_id,
            "stage_execution_id": stage_execution_id,
            "state": state,
            "outcome": json_param(outcome),
        },
    )


async def select_findings(conn: Connection, host_id: str, feature_run_id: str) -> list[Finding]:
    """Every canonical finding of a feature run."""
    cursor = await conn.execute(QUERIES["select_findings"], _key(host_id, feature_run_id))
    return [Finding(**row) for row in await cursor.fetchall()]


async def write_findings(
    conn: Connection, host_id: str, feature_run_id: str, findings: list[Finding]
) -> None:
    """Insert new findings and write each one's status."""
    for finding in findings:
        await conn.execute(
            QUERIES["upsert_finding"],
            _key(host_id, feature_run_id)
            | {
                "review_id": finding.review_id,
                "local_id": finding.local_id,
                "finding_id": finding.finding_id,
                "alias_of": finding.alias_of,
                "stage_execution_id": finding.stage_execution_id,
                "severity": finding.severity,
                "status": finding.status,
            },
        )


async def select_run(conn: Connection, host_id: str, process_id: str) -> RunRow | None:
    """A run's state and output, or None."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, QUERIES["select_run"], params, RunRow)
