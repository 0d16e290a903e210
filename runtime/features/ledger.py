"""Feature intake, reads, decisions and cancellation (workflow_feature_create, _get, _decide,
_cancel). Each mutation is one transaction under the feature's (or the slot's) row lock."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
from msgspec import UnsetType

from generated.models import (
    WorkflowFeatureCancelInput,
    WorkflowFeatureCancelOutput,
    WorkflowFeatureCreateInput,
    WorkflowFeatureCreateOutput,
    WorkflowFeatureDecideInput,
    WorkflowFeatureDecideOutput,
    WorkflowFeatureGetInput,
    WorkflowFeatureGetOutput,
)
from runtime.canonical import timestamp
from runtime.errors import WorkflowError
from runtime.features import store
from runtime.features.documents import feature_document
from runtime.features.operations import not_found, recorded, refuse, request_digest
from runtime.features.rules import (
    CANCELLED,
    READY,
    TERMINAL,
    Refusal,
    intake_refusal,
)
from runtime.features.signoff import OUTCOMES, reopen_refusal, signoff_refusal
from runtime.scheduler.service import cancel_process
from runtime.security import InvocationContext
from runtime.store import Connection, Database


def _id(value: str) -> str:
    return str(uuid.UUID(value))


def _given(value: Any, default: Any) -> Any:
    """An optional member's value, or its default when the request left it out."""
    return default if isinstance(value, UnsetType) else value


async def create_feature(
    db: Database, ctx: InvocationContext, args: WorkflowFeatureCreateInput
) -> WorkflowFeatureCreateOutput:
    """workflow_feature_create: pin scope, target, phases and requirements; take the slot."""
    tool = "workflow_feature_create"
    digest = request_digest(tool, args, ctx.user_id)
    given_phases = _given(args.phases, [])
    phases = [(p.phase_id, tuple(p.depends_on)) for p in given_phases]
    async with db.transaction() as conn:
        slot = await store.lock_slot(conn, ctx.host_id)
        replay = await recorded(conn, ctx.host_id, args.operation_id, tool, digest)
        if replay is not None:
            return msgspec.convert(replay, WorkflowFeatureCreateOutput)
        refusal = intake_refusal(args.scope, args.completion_target, phases)
        if refusal is not None:
            raise refuse(refusal, "WORKFLOW_INPUT_INVALID")
        if slot.feature_run_id is not None:
            raise refuse(
                Refusal(
                    "slot-held",
                    f"the host's feature slot is held by feature run {slot.feature_run_id}",
                    {"heldBy": slot.feature_run_id},
                )
            )
        feature_run_id = str(uuid.uuid4())
        generation = await store.take_slot(conn, ctx.host_id, feature_run_id)
        await store.insert_feature(
            conn,
            ctx.host_id,
            {
                "feature_run_id": feature_run_id,
                "issue": msgspec.to_builtins(args.issue),
                "scope": args.scope,
                "completion_target": args.completion_target,
                "require_design_signoff": _given(args.require_design_signoff, False),
                "phases": msgspec.to_builtins(given_phases),
                "accepted_inputs": {"requirements": msgspec.to_builtins(args.requirements)},
                "state": READY,
                "maximum_remediation_rounds": _given(args.maximum_remediation_rounds, 3),
                "maximum_turns": _given(args.maximum_turns, 40),
                "slot_generation": generation,
                "created_by": ctx.user_id,
            },
        )
        output = await _outcome(conn, ctx.host_id, feature_run_id)
        await store.insert_operation(conn, ctx.host_id, args.operation_id, tool, digest, output)
    return msgspec.convert(output, WorkflowFeatureCreateOutput)


async def _outcome(conn: Connection, host_id: str, feature_run_id: str) -> dict[str, Any]:
    row = await store.select_feature(conn, host_id, feature_run_id)
    assert row is not None
    return {"feature": await feature_document(conn, host_id, row), "outcome": "new"}


async def get_feature(
    db: Database, ctx: InvocationContext, args: WorkflowFeatureGetInput
) -> WorkflowFeatureGetOutput:
    """workflow_feature_get: the feature run as it stands (historical claims stay readable)."""
    async with db.transaction(read_only=True) as conn:
        row = await store.select_feature(conn, ctx.host_id, _id(args.feature_run_id))
        if row is None:
            raise not_found()
        document = await feature_document(conn, ctx.host_id, row)
    return msgspec.convert({"feature": document}, WorkflowFeatureGetOutput)


async def _locked(conn: Connection, host_id: str, feature_run_id: str) -> store.FeatureRow:
    row = await store.select_feature(conn, host_id, feature_run_id, lock=True)
    if row is None:
        raise not_found()
    return row


def _apply_decision(row: store.FeatureRow, args: WorkflowFeatureDecideInput, who: str) -> None:
    if args.decision == "reopen":
        refusal = reopen_refusal(row.state)
        if refusal is not None:
            raise refuse(refusal)
        # A new stage execution follows; the budget ledger and its consumption stay (F17).
        row.state, row.resolution_reason = READY, None
        return
    design = row.accepted_inputs.get("design", {}).get("digest")
    digest = args.design_digest if isinstance(args.design_digest, str) else None
    refusal = signoff_refusal(row.state, design, digest)
    if refusal is not None:
        raise refuse(refusal)
    signoff: dict[str, Any] = {
        "designDigest": digest,
        "decision": args.decision,
        "decidedBy": who,
        "decidedAt": timestamp(datetime.now(UTC)),
    }
    if isinstance(args.reason, str):
        signoff["reason"] = args.reason
    row.signoff = signoff
    row.state = OUTCOMES[args.decision]
    if args.decision == "request-changes":
        # Back to design: the accepted design no longer binds anything downstream.
        row.accepted_inputs = {k: v for k, v in row.accepted_inputs.items() if k != "design"}
        row.accepted_results = [r for r in row.accepted_results if r["stage"]["kind"] != "design"]
    if args.decision == "reject":
        row.resolution_reason = "the design sign-off was rejected"


async def decide_feature(
    db: Database, ctx: InvocationContext, args: WorkflowFeatureDecideInput
) -> WorkflowFeatureDecideOutput:
    """workflow_feature_decide: a design sign-off bound to its digest, or a reopen."""
    tool = "workflow_feature_decide"
    digest = request_digest(tool, args, ctx.user_id)
    feature_run_id = _id(args.feature_run_id)
    async with db.transaction() as conn:
        row = await _locked(conn, ctx.host_id, feature_run_id)
        replay = await recorded(conn, ctx.host_id, args.operation_id, tool, digest)
        if replay is not None:
            return msgspec.convert(replay, WorkflowFeatureDecideOutput)
        _apply_decision(row, args, ctx.user_id)
        row.version += 1
        await store.update_feature(conn, ctx.host_id, row)
        output = await _outcome(conn, ctx.host_id, feature_run_id)
        await store.insert_operation(conn, ctx.host_id, args.operation_id, tool, digest, output)
    return msgspec.convert(output, WorkflowFeatureDecideOutput)


async def _cancel_stage(conn: Connection, host_id: str, row: store.FeatureRow) -> None:
    """Settle the active claim and ask its run to stop, as its cancellation policy allows
    (a stage run past its first dispatch finishes; its late acceptance is refused)."""
    execution = row.active_stage_execution_id
    assert execution is not None
    claim = await store.claim_by_execution(conn, host_id, row.feature_run_id, execution)
    await store.settle_claim(conn, host_id, execution, "cancelled", None)
    if claim is not None:
        stopped = WorkflowError(
            "WORKFLOW_CANCELLED", "the run's feature was cancelled", status="cancelled"
        )
        await cancel_process(conn, host_id, claim.process_id, stopped)


async def cancel_feature(
    db: Database, ctx: InvocationContext, args: WorkflowFeatureCancelInput
) -> WorkflowFeatureCancelOutput:
    """workflow_feature_cancel: CANCELLED and the slot released, fenced by its generation."""
    tool = "workflow_feature_cancel"
    digest = request_digest(tool, args, ctx.user_id)
    feature_run_id = _id(args.feature_run_id)
    async with db.transaction() as conn:
        # The slot first, as create takes it: one lock order, no deadlock between the two.
        await store.lock_slot(conn, ctx.host_id)
        row = await _locked(conn, ctx.host_id, feature_run_id)
        replay = await recorded(conn, ctx.host_id, args.operation_id, tool, digest)
        if replay is not None:
            return msgspec.convert(replay, WorkflowFeatureCancelOutput)
        if row.state in TERMINAL:
            raise refuse(Refusal("feature-terminal", f"the feature run is {row.state}"))
        if args.slot_generation != row.slot_generation:
            raise refuse(
                Refusal(
                    "stale-generation",
                    "slotGeneration is not the feature's reservation generation",
                    {"slotGeneration": row.slot_generation},
                )
            )
        if row.active_stage_execution_id is not None:
            await _cancel_stage(conn, ctx.host_id, row)
        row.state, row.active_stage_execution_id = CANCELLED, None
        row.version += 1
        await store.update_feature(conn, ctx.host_id, row)
        await store.release_slot(conn, ctx.host_id, feature_run_id, row.slot_generation)
        output = await _outcome(conn, ctx.host_id, feature_run_id)
        await store.insert_operation(conn, ctx.host_id, args.operation_id, tool, digest, output)
    return msgspec.convert(output, WorkflowFeatureCancelOutput)
