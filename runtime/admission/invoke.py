"""workflow_invoke: admit a call against the Tool's active revision, then wait for its result."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import msgspec

from generated.models import WorkflowInvokeOutput
from runtime import telemetry
from runtime.admission import batches, door
from runtime.admission.controller import Arrival, invoke_key
from runtime.admission.launch import refresh_credential, seal_for
from runtime.admission.revisions import (
    ActiveRevision,
    cache_of,
    definition_retired,
    read_active_revision,
)
from runtime.admission.state import Admission
from runtime.admission.unknown_outcome import admit_or_unknown, unknown_admission
from runtime.errors import WorkflowError, policy_denied
from runtime.execution import WORKFLOW_TASK_KIND, RunSpec, first_task_payload, watch_run
from runtime.execution.credential import token_expiry
from runtime.invocation import rules, store
from runtime.invocation.requests import InvokeRequest
from runtime.invocation.waiting import WaitedRun, finish_invoke
from runtime.scheduler import (
    Reservation,
    announce_task,
    claimed_first_task,
    executors_here,
    reserve_local_slot,
)
from runtime.security import InvocationContext, Keyring, SealedSecret
from runtime.store import Database

NESTED_REFUSAL = "nested workflow-backed Tool calls require the workflow action dispatch"


@dataclass(frozen=True)
class Admitted:
    """The run a call ended up with, whether this call started it, and the run as admitted."""

    process_id: str
    outcome: str  # accepted | attach | replay
    definition_digest: str
    sync_wait_ms: int
    run: store.AdmittedRun
    # accepted with its first task claimed by this process's executor in the statement itself.
    started: bool = False


@dataclass(frozen=True)
class Sealed:
    """The caller's token sealed for the run this call would start."""

    process_id: str
    secret: SealedSecret


# Admissions against a cached revision, then against freshly read ones, before a call whose
# Tool head keeps moving under it is told to retry.
ADMISSION_TRIES = 3


def _check_digests(revision: ActiveRevision, request: InvokeRequest) -> None:
    expected_binding = request.expected_binding_digest
    if expected_binding is None:
        raise WorkflowError(
            "WORKFLOW_START_REJECTED",
            "expectedBindingDigest is required: pass the Tool's bindingDigest"
            " (workflow_tools_list_full or workflow_binding_get)",
        )
    if expected_binding != revision.binding_digest:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH", "expectedBindingDigest is not the active revision's"
        )
    if request.expected_definition_digest != revision.definition_digest:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH", "expectedDefinitionDigest is not the pinned version's"
        )


def _admission_params(
    ctx: InvocationContext, request: InvokeRequest, revision: ActiveRevision, sealed: Sealed
) -> store.AdmitParams:
    """Steps 1-6 of seed 000 admission that need no storage, as admit_invoke's parameters."""
    _check_digests(revision, request)
    rules.check_caller_policy(ctx, revision.caller_policy)
    # One canonicalization serves the digest and the size bound.
    canonical = rules.canonical_input(request.input)
    input_digest = rules.check_prepared_input(request.input, revision.input_checks, canonical)
    rules.check_request_bytes(request.input, revision.maximum_request_bytes, canonical=canonical)
    kind = revision.idempotency_kind
    key = rules.idempotency_key(kind, request.idempotency_key, input_digest)
    deadline_ts = datetime.now(UTC) + timedelta(milliseconds=revision.total_deadline_ms)
    limits = revision.admission_limits
    spec = RunSpec(
        host_id=ctx.host_id,
        process_id=sealed.process_id,
        wf_def_id=revision.wf_def_id,
        workflow_version=revision.workflow_version,
        definition=None,
        binding_id=revision.binding_id,
        user_id=ctx.user_id,
        limits=revision.run_limits,
    )
    budget = revision.budget
    return store.AdmitParams(
        host_id=ctx.host_id,
        tool_id=revision.tool_id,
        binding_id=revision.binding_id,
        wf_def_id=revision.wf_def_id,
        workflow_version=revision.workflow_version,
        check_evidence=revision.has_write_tasks,
        scope_digest=rules.scope_digest(
            kind,
            ctx.host_id,
            revision.tool_id,
            ctx.subject,
            key,
            profile=rules.input_profile(request.input),
        ),
        key_kind=kind,
        process_id=sealed.process_id,
        principal_subject=rules.principal_of(ctx),
        input_digest=input_digest,
        definition_digest=revision.definition_digest,
        result_replay_ms=revision.result_replay_ms,
        deadline_ts=deadline_ts,
        user_id=ctx.user_id,
        end_user_subject=ctx.subject,
        maximum_concurrent_runs=limits.maximum_concurrent_runs,
        maximum_concurrent_runs_per_user=limits.maximum_concurrent_runs_per_user,
        starts_per_minute=limits.starts_per_minute,
        starts_per_minute_per_user=limits.starts_per_minute_per_user,
        execution_class=revision.execution_class,
        cancellation_policy=revision.cancellation_policy,
        attempts=budget.attempts,
        nested_calls=budget.nested_calls,
        request_bytes=budget.request_bytes,
        intermediate_bytes=budget.intermediate_bytes,
        result_bytes=budget.result_bytes,
        cost_units=budget.cost_units,
        task_kind=WORKFLOW_TASK_KIND,
        payload=first_task_payload(spec, request.input),
        limits=revision.run_limits,
        secret=sealed.secret,
        # The verified exp (the same claim token_expiry would read, without a second decode).
        token_expires_ts=ctx.user_token_expires_at,
        action_limit=revision.action_limit,
        disclosure_ceiling=request.disclosure_ceiling,
    )


def _refusal(outcome: store.AdmitOutcome) -> WorkflowError:
    """The typed error of an admission the statement refused."""
    if outcome.outcome == "retired":
        return definition_retired()
    if outcome.outcome == "missing_evidence":
        return WorkflowError(
            "WORKFLOW_START_REJECTED",
            f"write task {outcome.detail} has no approval evidence for this binding revision",
        )
    if outcome.outcome == "conflict":
        return WorkflowError(
            "WORKFLOW_IDEMPOTENCY_CONFLICT",
            "this idempotency key is in use with another input, definition or client",
            workflow_instance_id=outcome.process_id,
        )
    return WorkflowError(
        "WORKFLOW_OPERATION_PENDING",
        "the Tool's publication changed while this call was admitted; retry",
    )


def _capacity_refusal(judge: Callable[[], None]) -> WorkflowError | None:
    """The load-shedding verdict of judge: its WORKFLOW_CAPACITY_EXHAUSTED, or None (fits)."""
    try:
        judge()
    except WorkflowError as refusal:
        if refusal.code != "WORKFLOW_CAPACITY_EXHAUSTED":
            raise
        return refusal
    return None


@dataclass
class _Shedding:
    """A call's load-shedding state across its admission tries: the verdict so far (None: fits)
    and its arrival, measured by the first admission that judges it."""

    refusal: WorkflowError | None
    arrival: Arrival | None


async def _admit_once(
    db: Database,
    admission: Admission,
    ctx: InvocationContext,
    request: InvokeRequest,
    sealed: Sealed,
    fresh: bool,
    shedding: _Shedding,
) -> tuple[ActiveRevision, store.AdmitOutcome]:
    tool_id = str(uuid.UUID(request.stable_tool_ref))
    cached = None if fresh else cache_of(db).get(ctx.host_id, tool_id)
    revision = cached or await read_active_revision(db, ctx.host_id, tool_id)
    try:
        params = _admission_params(ctx, request, revision, sealed)
    except WorkflowError:
        if cached is None:
            raise
        # A refusal read off a cached revision may be the cache's (the head moved since):
        # the stored revision decides.
        revision = await read_active_revision(db, ctx.host_id, tool_id)
        params = _admission_params(ctx, request, revision, sealed)
    if shedding.refusal is None:
        wait_ms = min(revision.sync_wait_ms, revision.total_deadline_ms)
        key = invoke_key(ctx.host_id, revision.tool_id, revision.binding_digest)
        shedding.refusal = _capacity_refusal(
            lambda: admission.estimator.admit(
                revision.execution_class, wait_ms, key, shedding.arrival
            )
        )
    shed = shedding.refusal
    # Shed calls still reach the statement: only a re-attach or replay of this very call may
    # pass (seed 000: the attach check runs before admission, so it skips capacity checks).
    # A free executor slot of this process takes the run's first task as it is enqueued (when
    # no ready task waits): no claim statement, no second commit before the task runs.
    slot = None if shed is not None else reserve_local_slot(revision.execution_class)
    params = msgspec.structs.replace(
        params,
        shed=shed is not None,
        worker_id=None if slot is None else slot.worker_id,
        lease_ms=None if slot is None else slot.lease_ms,
        overrun_ms=None if slot is None else slot.overrun_ms,
    )

    async def admit() -> store.AdmitOutcome:
        # Alone when the Tool is quiet, with the Tool's other waiting calls when it is busy.
        outcome = await batches.admit(admission.batcher(db), params)
        if outcome.outcome == "near_limit":
            # Rolled back whole: the same call again, alone, counted under the exclusive lock.
            async with db.connection() as conn:
                outcome = await store.admit_invoke(conn, params, exclusive=True)
        return outcome

    outcome: store.AdmitOutcome | None = None
    try:
        # Safe to repeat: a first try that committed before its answer was lost holds this
        # scope for this process id, so the repeat attaches to the run it admitted (a task
        # it claimed for the slot is then reclaimed when its lease runs out).
        outcome = await admit_or_unknown(
            admit,
            lambda: unknown_admission(
                sealed.process_id,
                request.idempotency_key,
                derived=params.key_kind == "derived",
                generated=False,
                may_write=params.check_evidence,
            ),
        )
    except store.AdmissionLimitReached as reached:
        rules.check_admission_limits(revision.admission_limits, reached.counts)
        raise AssertionError("the limit the statement reached is one the rules name") from None
    finally:
        if slot is not None and not _adopted(slot, params, revision, outcome):
            slot.release()
    return revision, outcome


def _adopted(
    slot: Reservation,
    params: store.AdmitParams,
    revision: ActiveRevision,
    outcome: store.AdmitOutcome | None,
) -> bool:
    """Hand the first task the statement inserted claimed to the reserved slot, if it did."""
    if outcome is None or outcome.outcome != "accepted" or outcome.lease is None:
        return False
    assert outcome.process_id is not None and outcome.detail is not None
    slot.adopt(
        *claimed_first_task(
            host_id=params.host_id,
            process_id=outcome.process_id,
            task_id=outcome.detail,
            kind=params.task_kind,
            payload=params.payload,
            execution_class=revision.execution_class,
            deadline_ts=params.deadline_ts,
            cancellation_policy=revision.cancellation_policy,
            lease_id=outcome.lease.lease_id,
            fencing_token=outcome.lease.fencing_token,
            lease_expires_ts=outcome.lease.expires_ts,
        )
    )
    return True


async def _admit(
    db: Database,
    admission: Admission,
    ctx: InvocationContext,
    request: InvokeRequest,
    keyring: Keyring,
    sealed: Sealed,
    shedding: _Shedding,
) -> Admitted:
    """Admit through the one statement: a cached revision first, a fresh one when stale.

    shedding: the load-shedding refusal decided before any round trip (None: the class has
    room) and the call's arrival.
    """
    for attempt in range(ADMISSION_TRIES):
        revision, outcome = await _admit_once(
            db, admission, ctx, request, sealed, fresh=attempt > 0, shedding=shedding
        )
        if outcome.outcome != "stale":
            break
        cache_of(db).forget(ctx.host_id, revision.tool_id)
    if outcome.outcome == "shed" and shedding.refusal is not None:
        raise shedding.refusal
    if outcome.outcome not in ("accepted", "attach", "replay") or outcome.process_id is None:
        raise _refusal(outcome)
    if outcome.outcome == "accepted":
        telemetry.run_admitted(outcome.process_id)
        assert outcome.detail is not None  # the statement names the run's first task
        if outcome.lease is None:
            # Left ready (no slot here was free, or ready work waits): the executors claim it.
            announce_task(db, outcome.detail, revision.execution_class)
    elif outcome.outcome == "attach":
        await _refresh_credential(db, keyring, ctx, outcome)
    # The reservation names a run admitted in a committed transaction.
    assert outcome.run is not None
    return Admitted(
        outcome.process_id,
        outcome.outcome,
        revision.definition_digest,
        revision.sync_wait_ms,
        outcome.run,
        started=outcome.lease is not None,
    )


async def _refresh_credential(
    db: Database, keyring: Keyring, ctx: InvocationContext, outcome: store.AdmitOutcome
) -> None:
    """On a re-attach: store the caller's token only when it outlives the stored one."""
    expires = token_expiry(ctx.user_token) or ctx.user_token_expires_at
    stored = outcome.token_expires_ts
    if stored is None or expires is None or expires <= stored:
        return
    assert outcome.process_id is not None
    async with db.connection() as conn:
        await refresh_credential(conn, keyring, ctx, outcome.process_id)


async def invoke_tool(
    db: Database,
    ctx: InvocationContext,
    request: InvokeRequest,
    keyring: Keyring,
    *,
    admission: Admission,
    arrived_at: float | None = None,
) -> WorkflowInvokeOutput:
    """workflow_invoke: admit (or re-attach, or replay), wait, return output or a typed error.

    One statement admits and enqueues; the watch on the new run is registered before it
    commits, so an executor of this process hands the run's end over without a read.
    """
    if request.parent_action_id is not None:
        raise policy_denied(NESTED_REFUSAL)
    # Overload is judged before any round trip (arrived_at: time.monotonic() at arrival); a
    # refused call costs one lock-free read, to let its own re-attach or replay through.
    if arrived_at is None:
        # Arrival at the front door (runtime.admission.door) when it came through it.
        arrived_at = door.arrived_at()
    shedding = _Shedding(None, None)

    def check() -> None:
        shedding.arrival = admission.estimator.check_invoke(
            ctx.host_id,
            request.stable_tool_ref,
            request.expected_binding_digest,
            time.monotonic() if arrived_at is None else arrived_at,
        )

    shedding.refusal = _capacity_refusal(check)
    # Sealed before the transaction (refused without a usable key): no lock waits on crypto.
    process_id = str(uuid.uuid4())
    sealed = Sealed(process_id, seal_for(keyring, ctx, process_id))
    # The call's place at the front door is kept until its run starts (runtime.admission.door).
    door.expect_start(process_id)
    async with watch_run(db, process_id) as watch:
        queued = False
        try:
            admitted = await telemetry.admission(
                "invoke", _admit(db, admission, ctx, request, keyring, sealed, shedding)
            )
            # Kept only while an executor here will start the run (and so free the place).
            queued = admitted.outcome == "accepted" and not admitted.started and executors_here()
        finally:
            door.admitted(queued=queued)
        if admitted.outcome == "accepted":
            return await finish_invoke(db, watch, ctx.host_id, _waited(admitted), admitted.run)
    async with watch_run(db, admitted.process_id) as watch:
        # Another call's run: it may have changed since admission read it, so read it again.
        return await finish_invoke(db, watch, ctx.host_id, _waited(admitted), None)


def _waited(admitted: Admitted) -> WaitedRun:
    return WaitedRun(
        process_id=admitted.process_id,
        definition_digest=admitted.definition_digest,
        sync_wait_ms=admitted.sync_wait_ms,
        admitted=admitted.run,
    )
