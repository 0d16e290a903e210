"""Storage helpers of durable execution: each takes a connection and never commits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

from runtime.binding_reach import Reach
from runtime.publication import pinned
from runtime.scheduler.models import LeaseState
from runtime.security import SealedSecret
from runtime.store import Connection, load_queries

QUERIES_PATH = Path(__file__).resolve().with_name("queries.sql")
QUERIES = load_queries(QUERIES_PATH)


@dataclass(frozen=True)
class RunSpec:
    """What one run executes: its definition source, caller and interpreter limits."""

    host_id: str
    process_id: str
    wf_def_id: str | None
    workflow_version: str | None
    definition: dict[str, Any] | None
    binding_id: str | None
    user_id: str
    limits: dict[str, Any]


@dataclass(frozen=True)
class StoredCredential:
    """A run's sealed credential, the token's own expiry, and whether it is an exchanged one."""

    sealed: SealedSecret
    token_expires_ts: datetime | None
    exchanged: bool = False


SPEC_KEY = "spec"


def spec_payload(spec: RunSpec) -> dict[str, Any]:
    """The run spec as the first task carries it (so its claim needs no read of the spec)."""
    return {
        "wfDefId": spec.wf_def_id,
        "workflowVersion": spec.workflow_version,
        "definition": spec.definition,
        "bindingId": spec.binding_id,
        "userId": spec.user_id,
        "limits": spec.limits,
    }


def spec_from_payload(host_id: str, process_id: str, payload: dict[str, Any]) -> RunSpec | None:
    """The run spec a task payload carries, or None (later tasks read it from the table)."""
    carried = payload.get(SPEC_KEY)
    if not isinstance(carried, dict):
        return None
    return RunSpec(
        host_id=host_id,
        process_id=process_id,
        wf_def_id=carried["wfDefId"],
        workflow_version=carried["workflowVersion"],
        definition=carried["definition"],
        binding_id=carried["bindingId"],
        user_id=carried["userId"],
        limits=carried["limits"],
    )


def _jsonb(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


async def insert_run_spec(
    conn: Connection,
    spec: RunSpec,
    sealed: SealedSecret | None,
    *,
    token_expires_ts: datetime | None,
    expires_ts: datetime,
) -> None:
    """Record what a new run executes and its sealed credential (if any) in one statement."""
    await conn.execute(
        QUERIES["insert_run_spec"],
        {
            "host_id": spec.host_id,
            "process_id": spec.process_id,
            "wf_def_id": spec.wf_def_id,
            "workflow_version": spec.workflow_version,
            "definition": _jsonb(spec.definition),
            "binding_id": spec.binding_id,
            "user_id": spec.user_id,
            "limits": Jsonb(spec.limits),
            "key_id": None if sealed is None else sealed.key_id,
            "nonce": None if sealed is None else sealed.nonce,
            "ciphertext": None if sealed is None else sealed.ciphertext,
            "token_expires_ts": token_expires_ts,
            "expires_ts": expires_ts,
        },
    )


async def select_run_spec(conn: Connection, host_id: str, process_id: str) -> RunSpec | None:
    """What a run executes, or None."""
    cursor = await conn.execute(
        QUERIES["select_run_spec"], {"host_id": host_id, "process_id": process_id}
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    return RunSpec(
        host_id=row["host_id"],
        process_id=row["process_id"],
        wf_def_id=row["wf_def_id"],
        workflow_version=row["workflow_version"],
        definition=row["definition"],
        binding_id=row["binding_id"],
        user_id=row["user_id"],
        limits=row["limits"],
    )


async def select_credential(
    conn: Connection, host_id: str, process_id: str
) -> StoredCredential | None:
    """A run's sealed credential, or None once the run ended."""
    cursor = await conn.execute(
        QUERIES["select_run_credential"], {"host_id": host_id, "process_id": process_id}
    )
    row = await cursor.fetchone()
    if row is None:
        return None
    sealed = SealedSecret(
        key_id=row["key_id"], nonce=bytes(row["nonce"]), ciphertext=bytes(row["ciphertext"])
    )
    return StoredCredential(sealed, row["token_expires_ts"], bool(row["exchanged"]))


async def replace_credential(
    conn: Connection,
    host_id: str,
    process_id: str,
    sealed: SealedSecret,
    token_expires_ts: datetime | None,
) -> bool:
    """Store an exchanged token for a live run when it outlives the stored one; whether it did."""
    cursor = await conn.execute(
        QUERIES["replace_exchanged_credential"],
        {
            "host_id": host_id,
            "process_id": process_id,
            "key_id": sealed.key_id,
            "nonce": sealed.nonce,
            "ciphertext": sealed.ciphertext,
            "token_expires_ts": token_expires_ts,
        },
    )
    return cursor.rowcount == 1


async def delete_expired_credentials(conn: Connection) -> int:
    """Forget credentials past their run's deadline; how many."""
    cursor = await conn.execute(QUERIES["delete_expired_credentials"])
    return len(await cursor.fetchall())


async def select_call_steps(
    conn: Connection, host_id: str, process_id: str, first_step: int, last_step: int
) -> dict[int, dict[str, Any]]:
    """Step ledger rows strictly between first_step and last_step, by step number."""
    cursor = await conn.execute(
        QUERIES["select_call_steps"],
        {
            "host_id": host_id,
            "process_id": process_id,
            "first_step": first_step,
            "last_step": last_step,
        },
    )
    return {row["step_no"]: dict(row) for row in await cursor.fetchall()}


async def insert_action_permit(
    conn: Connection,
    lease: LeaseState,
    *,
    action_id: str,
    user_id: str,
    grant_id: str,
    tool_name: str,
    contract_digest: str | None,
) -> bool:
    """Record one Tool call's permit under the lease; False when the lease is lost."""
    cursor = await conn.execute(
        QUERIES["insert_action_permit"],
        lease.fence()
        | {
            "action_id": action_id,
            "user_id": user_id,
            "grant_id": grant_id,
            "tool_name": tool_name,
            "contract_digest": contract_digest,
        },
    )
    return await cursor.fetchone() is not None


async def select_process_state(
    conn: Connection, host_id: str, process_id: str
) -> dict[str, Any] | None:
    """A run's state, result, error and effect state."""
    cursor = await conn.execute(
        QUERIES["select_process_state"], {"host_id": host_id, "process_id": process_id}
    )
    row = await cursor.fetchone()
    return None if row is None else dict(row)


async def select_definition_document(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> dict[str, Any] | None:
    """The document of a published definition version, or None."""
    return await pinned.definition_document(conn, host_id, wf_def_id, version)


async def select_grants(conn: Connection, host_id: str, wf_def_id: str) -> list[pinned.LiveGrant]:
    """The live grant set of a definition."""
    return await pinned.live_grants(conn, host_id, wf_def_id)


async def select_reach(conn: Connection, host_id: str, binding_id: str) -> Reach:
    """The reach (dependencies, endpoint targets) of one pinned binding revision."""
    return await pinned.revision_reach(conn, host_id, binding_id)
