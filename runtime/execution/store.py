"""Storage helpers of durable execution: each takes a connection and never commits."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
from psycopg.types.json import Jsonb

from runtime.binding_reach import Reach
from runtime.publication import pinned
from runtime.scheduler.models import EffectState, LeaseState, RunSnapshot
from runtime.security import SealedSecret
from runtime.store import Connection, fetch_all, fetch_one, load_queries

QUERIES_PATH = Path(__file__).resolve().with_name("queries.sql")
QUERIES = load_queries(QUERIES_PATH)


class SpecLimits(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """The interpreter limits a run spec stores (an invoked run's from its runtimeBounds).

    A workflow_start run stores none and gets the defaults; its step budget is then the
    setting alone. The loop bound and the read-only Tools are no spec limits: every run gets
    the engine's loop bound, and the read-only Tools come from the revision's reach.
    """

    maximum_task_attempts: int = 8
    maximum_parallelism: int = 8
    # Caps the step budget of each task attempt (runtime.execution.task_runner).
    maximum_cost_units: int | None = None


class RunSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What one run executes: its definition source, caller and interpreter limits."""

    host_id: str
    process_id: str
    wf_def_id: str | None
    workflow_version: str | None
    definition: dict[str, Any] | None
    binding_id: str | None
    user_id: str
    limits: SpecLimits


class _CarriedSpec(msgspec.Struct, frozen=True, rename="camel"):
    """The run spec as the first task's payload carries it (the run's ids are the task's)."""

    wf_def_id: str | None
    workflow_version: str | None
    definition: dict[str, Any] | None
    binding_id: str | None
    user_id: str
    limits: SpecLimits


class CallStep(msgspec.Struct, frozen=True):
    """A step ledger row of one outbound call: its effect state, output and request digest."""

    step_no: int
    effect_state: EffectState
    output: Any
    request_digest: str | None


class StoredCredential(msgspec.Struct, frozen=True):
    """A run's sealed credential, the token's own expiry, and whether it is an exchanged one."""

    sealed: SealedSecret
    token_expires_ts: datetime | None
    exchanged: bool = False


class _CredentialRow(msgspec.Struct, frozen=True):
    """select_run_credential's row: the sealed token's three columns, its expiry, exchanged."""

    key_id: str
    nonce: bytes
    ciphertext: bytes
    token_expires_ts: datetime | None
    exchanged: bool

    def __repr__(self) -> str:
        return f"_CredentialRow(key_id={self.key_id!r}, ciphertext_bytes={len(self.ciphertext)})"


SPEC_KEY = "spec"


def spec_payload(spec: RunSpec) -> dict[str, Any]:
    """The run spec as the first task carries it (so its claim needs no read of the spec)."""
    carried = _CarriedSpec(
        spec.wf_def_id,
        spec.workflow_version,
        spec.definition,
        spec.binding_id,
        spec.user_id,
        spec.limits,
    )
    payload: dict[str, Any] = msgspec.to_builtins(carried)
    return payload


def spec_from_payload(host_id: str, process_id: str, payload: dict[str, Any]) -> RunSpec | None:
    """The run spec a task payload carries, or None (later tasks read it from the table)."""
    carried = payload.get(SPEC_KEY)
    if not isinstance(carried, dict):
        return None
    spec = msgspec.convert(carried, _CarriedSpec)
    return RunSpec(
        host_id=host_id,
        process_id=process_id,
        wf_def_id=spec.wf_def_id,
        workflow_version=spec.workflow_version,
        definition=spec.definition,
        binding_id=spec.binding_id,
        user_id=spec.user_id,
        limits=spec.limits,
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
            "limits": Jsonb(msgspec.to_builtins(spec.limits)),
            "key_id": None if sealed is None else sealed.key_id,
            "nonce": None if sealed is None else sealed.nonce,
            "ciphertext": None if sealed is None else sealed.ciphertext,
            "token_expires_ts": token_expires_ts,
            "expires_ts": expires_ts,
        },
    )


async def select_run_spec(conn: Connection, host_id: str, process_id: str) -> RunSpec | None:
    """What a run executes, or None."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, QUERIES["select_run_spec"], params, RunSpec)


async def select_credential(
    conn: Connection, host_id: str, process_id: str
) -> StoredCredential | None:
    """A run's sealed credential, or None once the run ended."""
    params = {"host_id": host_id, "process_id": process_id}
    row = await fetch_one(conn, QUERIES["select_run_credential"], params, _CredentialRow)
    if row is None:
        return None
    sealed = SealedSecret(key_id=row.key_id, nonce=row.nonce, ciphertext=row.ciphertext)
    return StoredCredential(sealed, row.token_expires_ts, row.exchanged)


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
) -> dict[int, CallStep]:
    """Step ledger rows strictly between first_step and last_step, by step number."""
    params = {
        "host_id": host_id,
        "process_id": process_id,
        "first_step": first_step,
        "last_step": last_step,
    }
    steps = await fetch_all(conn, QUERIES["select_call_steps"], params, CallStep)
    return {step.step_no: step for step in steps}


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
) -> RunSnapshot | None:
    """A run's state, result, error and effect state."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, QUERIES["select_process_state"], params, RunSnapshot)


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
