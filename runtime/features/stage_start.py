"""workflow_feature_stage_start: the one claim-and-start transaction (seed 004 F2-F5, F7).

Under the feature's row lock: an existing claim of the same transition (feature, stage, predecessor
version) replays, with changed inputs it conflicts; a new claim needs the current version, no
owner, an allowed successor and the accepted input bindings; then workflow_start's admission of the
stage definition, the claim and the new owner are written in the same transaction. A crash before
the commit leaves no claim and no run; after it, a retry replays the same run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import msgspec

from generated.models import WorkflowFeatureStageStartInput, WorkflowFeatureStageStartOutput
from runtime.admission import Admission, note_admitted, start_stage_in
from runtime.canonical import canonical_digest
from runtime.errors import WorkflowError
from runtime.features import store
from runtime.features.budgets import rounds_left
from runtime.features.documents import claim_document, view_of
from runtime.features.findings import review_ids
from runtime.features.operations import not_found, recorded, refuse, request_digest
from runtime.features.rules import RUNNING, stage_key, start_refusal
from runtime.invocation import StartRequest
from runtime.scheduler import faults
from runtime.security import InvocationContext, Keyring
from runtime.store import Connection, Database

TOOL = "workflow_feature_stage_start"


@dataclass(frozen=True)
class StartServices:
    """What the stage's workflow_start admission needs (as handlers/workflow_start.py passes)."""

    keyring: Keyring
    admission: Admission
    start_roles: frozenset[str] | None
    disclosure_ceiling: list[str] | None


@dataclass(frozen=True)
class _Request:
    args: WorkflowFeatureStageStartInput
    feature_run_id: str
    stage: dict[str, Any]
    key: str
    inputs: dict[str, dict[str, str]]
    operation_digest: str
    claim_digest: str


def _request(args: WorkflowFeatureStageStartInput, user_id: str) -> _Request:
    phase = args.stage.phase_id if isinstance(args.stage.phase_id, str) else None
    stage = {"kind": args.stage.kind, "phaseId": phase}
    inputs: dict[str, dict[str, str]] = msgspec.to_builtins(args.inputs)
    expected = args.expected_definition_digest
    claim_request = {
        "stage": stage,
        "wfDefId": str(uuid.UUID(args.wf_def_id)),
        "inputs": inputs,
        "expectedDefinitionDigest": expected if isinstance(expected, str) else None,
    }
    return _Request(
        args=args,
        feature_run_id=str(uuid.UUID(args.feature_run_id)),
        stage=stage,
        key=stage_key(args.stage.kind, phase),
        inputs=inputs,
        operation_digest=request_digest(TOOL, args, user_id),
        claim_digest=canonical_digest(claim_request),
    )


def _output(claim: store.ClaimRow, outcome: str, version: int) -> dict[str, Any]:
    return {"claim": claim_document(claim), "outcome": outcome, "featureVersion": version}


def _run_input(row: store.FeatureRow, request: _Request, stage_execution_id: str) -> dict[str, Any]:
    """The stage run's pinned input: its identity, bindings and the review ids allocated now."""
    left = rounds_left(row.maximum_remediation_rounds, row.remediation_used.get(request.key, 0))
    return {
        "featureRunId": request.feature_run_id,
        "stageExecutionId": stage_execution_id,
        "stage": request.stage,
        "inputs": request.inputs,
        "remediationRoundsLeft": left,
        "reviewIds": review_ids(stage_execution_id, left),
    }


async def _replay(
    conn: Connection, ctx: InvocationContext, request: _Request, row: store.FeatureRow
) -> dict[str, Any] | None:
    """The existing claim of this transition as a replay, or None when there is none."""
    prior = await store.claim_by_transition(
        conn, ctx.host_id, request.feature_run_id, request.key, request.args.expected_version
    )
    if prior is None:
        return None
    if prior.request_digest != request.claim_digest:
        raise WorkflowError(
            "WORKFLOW_IDEMPOTENCY_CONFLICT",
            "this stage transition was already claimed with other inputs or another definition",
            details={"reason": "changed-inputs", "stageExecutionId": prior.stage_execution_id},
        )
    # A replay returns the original claim and run; it never starts or renews one (F4).
    return _output(prior, "replay", row.version)


async def start_stage(
    db: Database,
    ctx: InvocationContext,
    args: WorkflowFeatureStageStartInput,
    services: StartServices,
) -> WorkflowFeatureStageStartOutput:
    """Claim a stage and start its definition in one transaction."""
    request = _request(args, ctx.user_id)
    stage_execution_id = str(uuid.uuid4())
    process_id = str(uuid.uuid4())
    new_run = False
    async with db.transaction() as conn:
        row = await store.select_feature(conn, ctx.host_id, request.feature_run_id, lock=True)
        if row is None:
            raise not_found()
        replay = await recorded(
            conn, ctx.host_id, args.operation_id, TOOL, request.operation_digest
        ) or await _replay(conn, ctx, request, row)
        if replay is not None:
            return msgspec.convert(replay, WorkflowFeatureStageStartOutput)
        refusal = start_refusal(
            view_of(row),
            args.expected_version,
            args.stage.kind,
            request.stage["phaseId"],
            request.inputs,
        )
        if refusal is not None:
            raise refuse(refusal)
        expected = args.expected_definition_digest
        receipt, new_run = await start_stage_in(
            conn,
            ctx,
            StartRequest(
                wf_def_id=args.wf_def_id,
                input=_run_input(row, request, stage_execution_id),
                idempotency_key=stage_execution_id,
                expected_definition_digest=expected if isinstance(expected, str) else None,
                disclosure_ceiling=services.disclosure_ceiling,
            ),
            services.keyring,
            process_id=process_id,
            admission=services.admission,
            start_roles=services.start_roles,
        )
        claimed = await store.insert_claim(
            conn,
            ctx.host_id,
            {
                "feature_run_id": request.feature_run_id,
                "stage_key": request.key,
                "predecessor_version": args.expected_version,
                "stage": request.stage,
                "stage_execution_id": stage_execution_id,
                "process_id": receipt.workflow_instance_id,
                "wf_def_id": receipt.wf_def_id,
                "definition_digest": receipt.definition_digest,
                "inputs": request.inputs,
                "request_digest": request.claim_digest,
            },
        )
        row.active_stage_execution_id, row.state = stage_execution_id, RUNNING
        await store.update_feature(conn, ctx.host_id, row)
        claim = await store.claim_by_execution(
            conn, ctx.host_id, request.feature_run_id, stage_execution_id
        )
        assert claim is not None and claim.claimed_ts == claimed
        output = _output(claim, "new", row.version)
        await store.insert_operation(
            conn, ctx.host_id, args.operation_id, TOOL, request.operation_digest, output
        )
        await faults.point("before_stage_commit")
    await faults.point("after_stage_commit")
    if new_run:
        note_admitted(services.admission, process_id)
    return msgspec.convert(output, WorkflowFeatureStageStartOutput)
