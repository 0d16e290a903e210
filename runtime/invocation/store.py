"""Storage helpers of invocation admission: each takes a connection and never commits.

Rows come back as frozen structs; a revision's JSON columns decode into their contract types
(``generated.models``), so a field renamed in the contract fails type-checking here too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import psycopg
from psycopg.types.json import Jsonb

from generated.models import AdmissionLimits, CallerPolicy, IdempotencyPolicy, RuntimeBounds
from runtime.scheduler.models import (
    CancellationPolicy,
    EffectState,
    ExecutionClass,
    RunSnapshot,
    RunState,
)
from runtime.security import SealedSecret
from runtime.store import (
    Connection,
    fetch_all,
    fetch_built,
    fetch_one,
    fetch_one_built,
    json_param,
    load_queries,
)
from runtime.store.batches import in_call_order

QUERIES = load_queries(Path(__file__).resolve().with_name("queries.sql"))


class RevisionRow(msgspec.Struct, frozen=True, kw_only=True):
    """A Tool's active binding revision with its pinned version's status and document."""

    binding_id: str
    tool_id: str
    wf_def_id: str
    workflow_version: str
    definition_digest: str
    binding_digest: str
    sync_wait_ms: int
    total_deadline_ms: int
    execution_class: ExecutionClass
    cancellation_policy: CancellationPolicy
    idempotency_policy: IdempotencyPolicy
    runtime_bounds: RuntimeBounds
    admission_limits: AdmissionLimits
    caller_policy: CallerPolicy
    input_schema: dict[str, Any] | None
    has_write_tasks: bool
    version_status: str
    document: dict[str, Any]


class AdmittedRun(RunSnapshot, frozen=True, kw_only=True):
    """The run an admission names, as the statement read it."""

    deadline_ts: datetime


class OwnedRun(RunSnapshot, frozen=True, kw_only=True):
    """A run with who admitted it and through what (the lifecycle tools check the owner)."""

    process_id: str
    operation: str
    user_id: str
    end_user_subject: str
    principal_subject: str
    tool_id: str | None
    # The roles that authorized a workflow_start (None: an invoke run, or an older start).
    starter_roles: list[str] | None
    # The parts the caller's authorization let it see at acceptance (None: admitted before
    # ceilings were stored).
    disclosure_ceiling: list[str] | None
    wf_def_id: str
    definition_digest: str
    cancellation_policy: CancellationPolicy
    cancel_requested: bool
    deadline_ts: datetime
    created_ts: datetime
    updated_ts: datetime
    finished_ts: datetime | None


class SavedHead(msgspec.Struct, frozen=True):
    """A saved definition head (what workflow_start runs): its YAML text and digest."""

    wf_def_id: str
    definition: str
    definition_digest: str
    active: bool


class AdmissionCounts(msgspec.Struct, frozen=True):
    """A Tool's live runs and starts in the last minute, overall and for one end user."""

    live: int
    live_for_user: int
    recent: int
    recent_for_user: int
    oldest_recent: datetime | None
    oldest_recent_for_user: datetime | None
    next_live_deadline: datetime | None
    counted_at: datetime


class AdmitOutcome(msgspec.Struct, frozen=True):
    """What the one-statement admission decided, and the run it names (when there is one).

    outcome: accepted | attach | replay | conflict (the idempotency claim), or stale (the head
    no longer names the revision passed), retired, missing_evidence (detail: the task), shed
    (the call was to be shed and is no re-attach, replay or conflict; nothing was written),
    near_limit (nothing was written: repeat with exclusive, the counts need the Tool's lock).
    """

    outcome: str
    process_id: str | None
    run: AdmittedRun | None
    token_expires_ts: datetime | None
    detail: str | None
    # accepted with the first task inserted claimed by the worker passed: its lease.
    lease: FirstTaskLease | None = None


class FirstTaskLease(msgspec.Struct, frozen=True):
    """The lease of a run's first task the admission inserted claimed by this process."""

    lease_id: str
    fencing_token: int
    expires_ts: datetime


class RunParams(msgspec.Struct, frozen=True, kw_only=True):
    """What either admission claims and writes for a new run (workflow_admit_claimed_run):
    the call's scope and caller, the run's class, policy, budget, first task and spec.

    payload holds plain JSON values and limits the run spec's limits (both sent as jsonb).
    """

    host_id: str
    wf_def_id: str
    scope_digest: str
    process_id: str
    principal_subject: str
    input_digest: str
    definition_digest: str
    deadline_ts: datetime
    user_id: str
    end_user_subject: str
    execution_class: ExecutionClass
    cancellation_policy: CancellationPolicy
    attempts: int
    nested_calls: int
    request_bytes: int
    intermediate_bytes: int
    result_bytes: int
    cost_units: int
    task_kind: str
    payload: dict[str, Any]
    limits: msgspec.Struct
    token_expires_ts: datetime | None
    action_limit: int
    # The parts of the run its caller may see (runtime/invocation/disclosure.py); None: no
    # ceiling (the current authorization alone).
    disclosure_ceiling: list[str] | None = None


class AdmitParams(RunParams, frozen=True, kw_only=True):
    """admit_invoke's parameters but exclusive: the call, its scope, limits, run and first task.

    payload holds plain JSON values and limits the run spec's limits (both sent as jsonb); the
    sealed token goes out as its three columns.
    """

    tool_id: str
    binding_id: str
    workflow_version: str
    check_evidence: bool
    key_kind: str
    result_replay_ms: int
    maximum_concurrent_runs: int | None
    maximum_concurrent_runs_per_user: int | None
    starts_per_minute: int | None
    starts_per_minute_per_user: int | None
    secret: SealedSecret
    # Set once capacity has judged the call and a local executor slot was (or was not) taken.
    shed: bool = False
    worker_id: str | None = None
    lease_ms: int | None = None
    overrun_ms: int | None = None


class AdmitRow(msgspec.Struct, frozen=True, kw_only=True):
    """admit_invoke's one row: the outcome, the run it names, the first task's lease."""

    outcome: str
    process_id: str | None
    state: RunState | None
    effect_state: EffectState | None
    deadline_ts: datetime | None
    result: Any
    error: dict[str, Any] | None
    token_expires_ts: datetime | None
    detail: str | None
    lease_id: str | None
    fencing_token: int | None
    lease_expires_ts: datetime | None


class AdmitBatchRow(AdmitRow, frozen=True, kw_only=True):
    """admit_invoke_batch's row of one call: its admission's row, or the refusal it raised."""

    # NULL on a refusal's row (its refusal set instead).
    outcome: str | None  # type: ignore[assignment]
    ordinal: int
    refusal: str | None
    refusal_detail: str | None


class StartParams(RunParams, frozen=True, kw_only=True):
    """admit_start's parameters: the saved head, the call, its run and its verdict.

    payload holds plain JSON values, limits the run spec's limits (both sent as jsonb); the
    sealed token (None: no usable key) goes out as its three columns.
    """

    definition: dict[str, Any]
    starter_roles: list[str] | None
    secret: SealedSecret | None
    # A verdict decided before the statement refuses a new run (attach, replay, conflict pass).
    refuse_new: bool


class StartOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """admit_start's one row: the outcome and, but for a conflict, the run as the receipt shows.

    outcome: accepted | attach | replay | conflict, or refused (a new run the verdict refused;
    nothing was written).
    """

    outcome: str
    process_id: str | None
    state: RunState | None
    definition_digest: str | None
    created_ts: datetime | None


class ClosedRevision(msgspec.Struct, frozen=True):
    """The status of a Tool's most recently closed revision."""

    revision_status: str


class RetentionSwept(msgspec.Struct, frozen=True):
    """How many expired reservations and old finished runs a retention sweep removed."""

    reservations: int
    runs: int


class AdmissionLimitReached(Exception):
    """A Tool's admission limit is reached; nothing of the admission was written."""

    def __init__(self, counts: AdmissionCounts) -> None:
        super().__init__("admission limit reached")
        self.counts = counts


_LIMIT_REACHED = "workflow_admission_limit_reached"
_SHED = "workflow_capacity_shed"
_NEAR_LIMIT = "workflow_admission_near_limit"


async def select_active_revision(
    conn: Connection, host_id: str, tool_id: str
) -> tuple[bool, RevisionRow | None]:
    """Whether the Tool has a head, and its active revision with the pinned version (no lock)."""
    params = {"host_id": host_id, "tool_id": tool_id}
    cursor = await conn.execute(QUERIES["select_active_revision"], params)
    # The head's row, its revision columns NULL when it has none: converted only when set.
    row = await cursor.fetchone()
    if row is None or row["binding_id"] is None:
        return row is not None, None
    return True, msgspec.convert(row, RevisionRow)


def _run_values(params: AdmitParams | StartParams) -> dict[str, Any]:
    """An admission's statement parameters: jsonb as such, the sealed token as its columns."""
    values = msgspec.structs.asdict(params)
    secret: SealedSecret | None = values.pop("secret")
    return values | {
        "disclosure_ceiling": _text_array(params.disclosure_ceiling),
        "payload": Jsonb(params.payload),
        "limits": json_param(params.limits),
        "key_id": None if secret is None else secret.key_id,
        "nonce": None if secret is None else secret.nonce,
        "ciphertext": None if secret is None else secret.ciphertext,
    }


def _text_array(parts: list[str] | None) -> str | None:
    """A text[] literal of fixed words (disclosure parts): the server parses it, so psycopg's
    list adaptation (element type search, array dumper) stays off the admission path."""
    return None if parts is None else "{" + ",".join(parts) + "}"


async def admit_invoke(
    conn: Connection, params: AdmitParams, *, exclusive: bool = False
) -> AdmitOutcome:
    """Run workflow_invoke's admission as one autocommit statement (its own transaction).

    exclusive: count under the Tool's lock (the repeat of a near_limit answer).
    Raises AdmissionLimitReached when a limit is reached (the statement rolled back whole).
    """
    values = _run_values(params) | {"exclusive": exclusive}
    try:
        row = await fetch_one_built(conn, QUERIES["admit_invoke"], values, AdmitRow)
    except psycopg.errors.RaiseException as exc:
        refused = _refused(exc.diag.message_primary, exc.diag.message_detail)
        if refused is None:
            raise
        if isinstance(refused, AdmissionLimitReached):
            raise refused from None
        return refused
    assert row is not None  # the function returns exactly one row
    return _outcome(row)


async def admit_invoke_batch(
    conn: Connection, calls: Sequence[AdmitParams]
) -> list[AdmitOutcome | AdmissionLimitReached]:
    """Admit calls of one Tool in one autocommit statement (one transaction), each on its own.

    Each call's answer, in order, is what admit_invoke would return or raise for it alone;
    near_limit means only that call must be repeated alone with exclusive.
    """
    batch = msgspec.json.encode([_batch_values(call) for call in calls]).decode()
    rows = await fetch_built(conn, QUERIES["admit_invoke_batch"], {"calls": batch}, AdmitBatchRow)
    return in_call_order(len(calls), ((row.ordinal, _batch_answer(row)) for row in rows))


def _batch_answer(row: AdmitBatchRow) -> AdmitOutcome | AdmissionLimitReached:
    if row.refusal is None:
        return _outcome(row)
    refused = _refused(row.refusal, row.refusal_detail)
    # The batch function reports only the refusals it knows (it re-raises any other).
    assert refused is not None
    return refused


def _batch_values(params: AdmitParams) -> dict[str, Any]:
    # workflow_admit_invoke_batch reads each call's parameters by name (bytea as base64).
    values: dict[str, Any] = msgspec.to_builtins(params)
    secret: dict[str, Any] = values.pop("secret")
    return values | secret


def _refused(
    message: str | None, detail: str | None
) -> AdmitOutcome | AdmissionLimitReached | None:
    """The answer of an admission the function refused by raising message; None: not a refusal."""
    if message == _SHED:
        return AdmitOutcome("shed", None, None, None, None)
    if message == _NEAR_LIMIT:
        return AdmitOutcome("near_limit", None, None, None, None)
    if message != _LIMIT_REACHED or detail is None:
        return None
    return AdmissionLimitReached(_counts(json.loads(detail)))


def _outcome(row: AdmitRow) -> AdmitOutcome:
    assert row.outcome is not None  # a row that is no refusal has its outcome
    run = None if row.state is None else _admitted_run(row, row.state)
    lease = None
    if row.lease_id is not None:
        assert row.fencing_token is not None and row.lease_expires_ts is not None
        lease = FirstTaskLease(row.lease_id, row.fencing_token, row.lease_expires_ts)
    return AdmitOutcome(row.outcome, row.process_id, run, row.token_expires_ts, row.detail, lease)


def _admitted_run(row: AdmitRow, state: RunState) -> AdmittedRun:
    # A row that names a run has all of its columns.
    assert row.effect_state is not None and row.deadline_ts is not None
    return AdmittedRun(
        state=state,
        result=row.result,
        error=row.error,
        effect_state=row.effect_state,
        deadline_ts=row.deadline_ts,
    )


def _timestamp(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(str(value))


def _counts(counts: dict[str, Any]) -> AdmissionCounts:
    counted_at = _timestamp(counts["counted_at"])
    assert counted_at is not None  # the function always sets it
    return AdmissionCounts(
        live=int(counts["live"]),
        live_for_user=int(counts["live_for_user"]),
        recent=int(counts["recent"]),
        recent_for_user=int(counts["recent_for_user"]),
        oldest_recent=_timestamp(counts["oldest_recent"]),
        oldest_recent_for_user=_timestamp(counts["oldest_recent_for_user"]),
        next_live_deadline=_timestamp(counts["next_live_deadline"]),
        counted_at=counted_at,
    )


async def select_last_closed_status(conn: Connection, host_id: str, tool_id: str) -> str | None:
    """The status of the Tool's most recently closed revision, if any."""
    params = {"host_id": host_id, "tool_id": tool_id}
    row = await fetch_one(conn, QUERIES["select_last_closed_status"], params, ClosedRevision)
    return None if row is None else row.revision_status


async def select_head(conn: Connection, host_id: str, wf_def_id: str) -> SavedHead | None:
    """A saved definition head, or None."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    return await fetch_one(conn, QUERIES["select_head"], params, SavedHead)


async def admit_start(conn: Connection, params: StartParams) -> StartOutcome:
    """Run workflow_start's admission as one autocommit statement (its own transaction)."""
    values = _run_values(params) | {"definition": Jsonb(params.definition)}
    try:
        row = await fetch_one_built(conn, QUERIES["admit_start"], values, StartOutcome)
    except psycopg.errors.RaiseException as exc:
        if exc.diag.message_primary != _SHED:
            raise
        return StartOutcome(
            outcome="refused", process_id=None, state=None, definition_digest=None, created_ts=None
        )
    assert row is not None  # the reservation names a run written with its owner record
    return row


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


async def select_owned_run(conn: Connection, host_id: str, process_id: str) -> OwnedRun | None:
    """A run admitted here with its owner and state, or None."""
    params = {"host_id": host_id, "process_id": process_id}
    return await fetch_one(conn, QUERIES["select_owned_run"], params, OwnedRun)


async def sweep_retention(conn: Connection, retention_s: float, batch: int) -> tuple[int, int]:
    """Delete expired reservations and old finished runs; (reservations, runs) removed."""
    params = {"retention_s": retention_s, "batch": batch}
    row = await fetch_one(conn, QUERIES["sweep_retention"], params, RetentionSwept)
    assert row is not None  # the function always returns one row
    return row.reservations, row.runs


async def sweep_start_counts(conn: Connection, batch: int) -> int:
    """Delete per-second start counts no window can reach any more; how many went."""
    cursor = await conn.execute(QUERIES["sweep_start_counts"], {"batch": batch})
    return cursor.rowcount


async def select_started_runs(
    conn: Connection,
    host_id: str,
    owner: tuple[str, str, str],
    before: tuple[datetime, str] | None,
    limit: int,
) -> list[OwnedRun]:
    """One caller's start runs (owner: user id, subject, principal), newest first, after before."""
    user_id, subject, principal = owner
    params = {
        "host_id": host_id,
        "user_id": user_id,
        "subject": subject,
        "principal": principal,
        "before_ts": None if before is None else before[0],
        "before_id": None if before is None else before[1],
        "limit": limit,
    }
    return await fetch_all(conn, QUERIES["select_started_runs"], params, OwnedRun)
