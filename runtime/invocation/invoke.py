"""workflow_invoke: admit a call against the Tool's active revision, then wait for its result."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from generated.models import WorkflowInvokeOutput
from runtime import telemetry
from runtime.errors import WorkflowError, policy_denied
from runtime.execution import watch_run
from runtime.invocation import rules, store
from runtime.invocation.launch import RunPlan, refresh_credential, seal_for, write_run
from runtime.invocation.requests import InvokeRequest
from runtime.invocation.waiting import WaitedRun, finish_invoke
from runtime.scheduler import capacity
from runtime.security import InvocationContext, Keyring, SealedSecret
from runtime.store import Connection, Database

NESTED_REFUSAL = "nested workflow-backed Tool calls require the workflow action dispatch"


@dataclass(frozen=True)
class Admitted:
    """The run a call ended up with, whether this call started it, and the run as admitted."""

    process_id: str
    outcome: str  # accepted | attach | replay
    definition_digest: str
    sync_wait_ms: int
    # state, deadline_ts, effect_state (and result and error when it already ended).
    run: dict[str, Any]


@dataclass(frozen=True)
class Sealed:
    """The caller's token sealed for the run this call would start."""

    process_id: str
    secret: SealedSecret


def _unknown_tool() -> WorkflowError:
    # The lookup is host-scoped: a Tool of another host reads exactly like an unknown one.
    return WorkflowError(
        "WORKFLOW_NOT_FOUND", "no workflow-backed Tool with this stableToolRef on the caller's host"
    )


async def _active_revision(conn: Connection, host_id: str, tool_id: str) -> dict[str, Any]:
    row = await store.lock_active_revision(conn, host_id, tool_id)
    if row is not None and row["binding_id"] is not None:
        return row
    closed = await store.select_last_closed_status(conn, host_id, tool_id)
    if row is None and closed is None:
        raise _unknown_tool()
    if closed == "revoked":
        raise policy_denied("binding revoked by workflow owner")
    raise policy_denied("the Tool has no active owner-approved binding revision")


def _check_digests(revision: Mapping[str, Any], request: InvokeRequest) -> None:
    expected_binding = request.expected_binding_digest
    if expected_binding is None:
        raise WorkflowError(
            "WORKFLOW_START_REJECTED",
            "expectedBindingDigest is required: pass the Tool's bindingDigest"
            " (workflow_tools_list_full or workflow_binding_get)",
        )
    if expected_binding != revision["binding_digest"]:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH", "expectedBindingDigest is not the active revision's"
        )
    if request.expected_definition_digest != revision["definition_digest"]:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH", "expectedDefinitionDigest is not the pinned version's"
        )


async def _pinned_document(conn: Connection, host_id: str, revision: Mapping[str, Any]) -> Any:
    version = await store.lock_version_for_share(
        conn, host_id, revision["wf_def_id"], revision["workflow_version"]
    )
    if version is None or version["status"] == "retired":
        raise WorkflowError(
            "WORKFLOW_DEFINITION_RETIRED", "the Tool's pinned definition version is retired"
        )
    return version["document"]


def _plan(revision: Mapping[str, Any], request: InvokeRequest, process_id: str) -> RunPlan:
    bounds = revision["runtime_bounds"]
    now = datetime.now(UTC)
    return RunPlan(
        process_id=process_id,
        operation="invoke",
        input=request.input,
        wf_def_id=revision["wf_def_id"],
        workflow_version=revision["workflow_version"],
        definition_digest=revision["definition_digest"],
        deadline_ts=now + timedelta(milliseconds=int(revision["total_deadline_ms"])),
        execution_class=revision["execution_class"],
        cancellation_policy=revision["cancellation_policy"],
        budget=rules.budget_from(bounds),
        limits=rules.run_limits_from(bounds),
        tool_id=revision["tool_id"],
        binding_id=revision["binding_id"],
    )


def _authority(ctx: InvocationContext, plan: RunPlan, action_limit: int) -> dict[str, Any]:
    # Seed 000: an invoke run has no LONG grant, so the run id is its grant id.
    return {
        "host_id": ctx.host_id,
        "grant_id": plan.process_id,
        "process_id": plan.process_id,
        "user_id": ctx.user_id,
        "deadline_ts": plan.deadline_ts,
        "action_limit": action_limit,
        "credential_kind": "invoke",
    }


async def _admit_new_run(
    conn: Connection,
    ctx: InvocationContext,
    revision: Mapping[str, Any],
    plan: RunPlan,
    sealed: Sealed,
    principal: str,
) -> None:
    """Step 7 for a new run: evidence, capacity, admission limits, then the run and authority.

    Any refusal rolls the reservation back with the rest of the admission transaction.
    """
    binding_id, tool_id = revision["binding_id"], revision["tool_id"]
    if revision.get("has_write_tasks", True):
        rules.check_evidence(await store.select_missing_evidence(conn, ctx.host_id, binding_id))
    wait_ms = min(int(revision["sync_wait_ms"]), int(revision["total_deadline_ms"]))
    key = capacity.invoke_key(ctx.host_id, tool_id, revision["binding_digest"])
    capacity.admit(plan.execution_class, wait_ms, key)
    await store.lock_tool_admission(conn, ctx.host_id, tool_id)
    counts = await store.count_tool_admissions(conn, ctx.host_id, tool_id, ctx.subject)
    rules.check_admission_limits(revision["admission_limits"], counts)
    await write_run(conn, ctx, plan, sealed.secret, principal)
    limit = rules.action_limit_from(revision["runtime_bounds"])
    await store.insert_action_authority(conn, _authority(ctx, plan, limit))


async def _admit(
    conn: Connection,
    ctx: InvocationContext,
    request: InvokeRequest,
    keyring: Keyring,
    sealed: Sealed,
) -> Admitted:
    tool_id = str(uuid.UUID(request.stable_tool_ref))
    revision = await _active_revision(conn, ctx.host_id, tool_id)
    _check_digests(revision, request)
    document = await _pinned_document(conn, ctx.host_id, revision)
    rules.check_caller_policy(ctx, revision["caller_policy"])
    # One canonicalization serves the digest and the size bound.
    canonical = rules.canonical_input(request.input)
    input_digest = rules.check_input(
        request.input, revision["input_schema"], document, canonical=canonical
    )
    rules.check_request_bytes(request.input, revision["runtime_bounds"], canonical=canonical)
    policy = revision["idempotency_policy"]
    key = rules.idempotency_key(policy, request.idempotency_key, input_digest)
    plan = _plan(revision, request, sealed.process_id)
    principal = rules.principal_of(ctx)
    claim = await store.claim_idempotency(
        conn,
        {
            "host_id": ctx.host_id,
            "scope_digest": rules.scope_digest(
                policy["kind"],
                ctx.host_id,
                tool_id,
                ctx.subject,
                key,
                profile=rules.input_profile(request.input),
            ),
            "operation": "invoke",
            "key_kind": policy["kind"],
            "process_id": plan.process_id,
            "principal_subject": principal,
            "input_digest": input_digest,
            "definition_digest": revision["definition_digest"],
            "result_replay_ms": int(policy["resultReplayMs"]),
            "deadline_ts": plan.deadline_ts,
        },
    )
    sync_wait_ms = int(revision["sync_wait_ms"])
    if claim.outcome == "conflict":
        raise WorkflowError(
            "WORKFLOW_IDEMPOTENCY_CONFLICT",
            "this idempotency key is in use with another input, definition or client",
            workflow_instance_id=claim.process_id,
        )
    if claim.outcome == "accepted":
        # Re-attach and replay never reach this branch: they never count as starts.
        await _admit_new_run(conn, ctx, revision, plan, sealed, principal)
        run = {"state": "ACCEPTED", "deadline_ts": plan.deadline_ts, "effect_state": "none"}
    else:
        if claim.outcome == "attach":
            await refresh_credential(conn, keyring, ctx, claim.process_id)
        owned = await store.select_owned_run(conn, ctx.host_id, claim.process_id)
        assert owned is not None  # the reservation names a run admitted in a committed tx
        run = owned
    return Admitted(
        claim.process_id, claim.outcome, revision["definition_digest"], sync_wait_ms, run
    )


async def invoke_tool(
    db: Database,
    ctx: InvocationContext,
    request: InvokeRequest,
    keyring: Keyring,
    arrived_at: float | None = None,
) -> WorkflowInvokeOutput:
    """workflow_invoke: admit (or re-attach, or replay), wait, return output or a typed error.

    One transaction admits and enqueues; the watch on the new run is registered before it
    commits, so an executor of this process hands the run's end over without a read.
    """
    if request.parent_action_id is not None:
        raise policy_denied(NESTED_REFUSAL)
    # Overload is shed before a connection is taken (arrived_at: time.monotonic() at arrival).
    capacity.check_invoke(
        ctx.host_id,
        request.stable_tool_ref,
        request.expected_binding_digest,
        time.monotonic() if arrived_at is None else arrived_at,
    )
    # Sealed before the transaction (refused without a usable key): no lock waits on crypto.
    process_id = str(uuid.uuid4())
    sealed = Sealed(process_id, seal_for(keyring, ctx, process_id))
    async with watch_run(db, process_id) as watch:
        async with db.transaction() as conn:
            admitted = await telemetry.admission(
                "invoke", _admit(conn, ctx, request, keyring, sealed)
            )
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
        deadline_ts=admitted.run["deadline_ts"],
        admitted_state=admitted.run["state"],
        admitted=admitted.run,
    )
