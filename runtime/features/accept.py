"""workflow_feature_stage_accept: validate a stage run's StageResult and settle its claim (F6,
F13-F17). Acceptance needs a completed run whose StageResult binds this claim and the feature's
current inputs, Workflow-allocated review ids, an accepted last review, no open actionable
finding and a budget still covering what the run consumed; anything else is
human-resolution-required, never an acceptance. The outcome is recorded on the claim, so every
later accept of it replays the same canonical finding ids.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import msgspec

from generated.models import WorkflowFeatureStageAcceptInput, WorkflowFeatureStageAcceptOutput
from runtime.canonical import canonical_digest
from runtime.features import store
from runtime.features.budgets import charge
from runtime.features.coverage import result_coverage_refusal
from runtime.features.documents import feature_document, view_of
from runtime.features.findings import Allocation, Finding, allocate, open_actionable, review_ids
from runtime.features.operations import not_found, recorded, refuse, request_digest
from runtime.features.rules import (
    CANCELLED,
    COMPLETED,
    HUMAN,
    Refusal,
    required_inputs,
    state_after_acceptance,
)
from runtime.features.wire import MalformedResult, parse_stage_result
from runtime.security import InvocationContext
from runtime.store import Connection, Database

TOOL = "workflow_feature_stage_accept"
LIVE = frozenset({"ACCEPTED", "RUNNING", "WAITING"})


@dataclass
class Verdict:
    """What a stage run's result means for the feature."""

    accepted: bool
    reason: str | None = None
    result: dict[str, Any] | None = None
    allocation: Allocation | None = None
    rounds: int = 0
    turns: int = 0
    new_ids: list[dict[str, str]] = field(default_factory=list)


def _binding_problem(
    result: dict[str, Any], claim: store.ClaimRow, current: dict[str, dict[str, str]]
) -> str | None:
    if result["featureRunId"] != claim.feature_run_id:
        return "the StageResult names another feature run"
    if result["stageExecutionId"] != claim.stage_execution_id:
        return "the StageResult names another stage execution"
    stage = {"kind": result["stage"]["kind"], "phaseId": result["stage"].get("phaseId")}
    if stage != claim.stage:
        return "the StageResult names another stage"
    if result["inputs"] != claim.inputs or claim.inputs != current:
        return "the StageResult's inputs are not the claim's current input bindings"
    allocated = review_ids(claim.stage_execution_id, len(result["reviews"]) - 1)
    for review, review_id in zip(result["reviews"], allocated, strict=True):
        binding = review["binding"]
        if (binding["reviewId"], binding["featureRunId"], binding["stageExecutionId"]) != (
            review_id,
            claim.feature_run_id,
            claim.stage_execution_id,
        ):
            return (
                f"review {binding['reviewId']} is not the review Workflow allocated ({review_id})"
            )
    return None


def judge(
    row: store.FeatureRow,
    claim: store.ClaimRow,
    run: store.RunRow,
    findings: list[Finding],
) -> Verdict:
    """The verdict on a finished stage run (pure: the rows in, the verdict out)."""
    if run.state != "COMPLETED":
        return Verdict(False, f"the stage run ended {run.state}")
    try:
        result = parse_stage_result(run.result)
    except MalformedResult as error:
        # Malformed output never means "no findings" (F16).
        return Verdict(False, f"the stage run's output is not a valid StageResult: {error}")
    current = required_inputs(view_of(row), claim.stage["kind"])
    problem = _binding_problem(result, claim, current)
    if problem is not None:
        return Verdict(False, problem)
    allocation = allocate(
        claim.feature_run_id, claim.stage_execution_id, findings, result["reviews"]
    )
    spent = charge(
        reviews=len(result["reviews"]),
        remediation_turns=len(result["remediations"]),
        maximum_rounds=row.maximum_remediation_rounds,
        rounds_used=row.remediation_used.get(claim.stage_key, 0),
        maximum_turns=row.maximum_turns,
        turns_used=row.turns_used,
    )
    verdict = Verdict(True, None, result, allocation, spent.rounds, spent.turns, allocation.new_ids)
    still_open = open_actionable(allocation.findings, {claim.stage_execution_id})
    covered = result.get("coverage")
    uncovered = (
        None if covered is None else result_coverage_refusal(covered, result["artifact"]["digest"])
    )
    if uncovered is not None:
        verdict.accepted, verdict.reason = False, f"review coverage: {uncovered.message}"
    elif not spent.within:
        verdict.accepted, verdict.reason = False, "the remediation or turn budget is exhausted"
    elif not result["reviews"][-1]["accepted"]:
        verdict.accepted, verdict.reason = False, "the last review did not accept the candidate"
    elif still_open:
        verdict.accepted, verdict.reason = False, f"{len(still_open)} actionable findings are open"
    elif allocation.unresolved:
        verdict.accepted = False
        verdict.reason = "a review cites findings that are not this feature's or are ambiguous"
    return verdict


def _apply(row: store.FeatureRow, claim: store.ClaimRow, verdict: Verdict) -> str:
    """Write the verdict into the feature row; the claim's new state."""
    key = claim.stage_key
    row.remediation_used = row.remediation_used | {
        key: row.remediation_used.get(key, 0) + verdict.rounds
    }
    row.turns_used += verdict.turns
    row.version += 1
    row.active_stage_execution_id = None
    if not verdict.accepted or verdict.result is None:
        row.state, row.resolution_reason = HUMAN, verdict.reason
        return "human-resolution-required"
    result = verdict.result
    row.accepted_results = [
        *row.accepted_results,
        {
            "stage": claim.stage,
            "stageExecutionId": claim.stage_execution_id,
            "artifact": result["artifact"],
            "resultDigest": canonical_digest(result),
            "acceptedVersion": row.version,
        },
    ]
    if claim.stage["kind"] == "design":
        row.accepted_inputs = row.accepted_inputs | {"design": result["artifact"]}
    row.state = state_after_acceptance(claim.stage["kind"], row.require_design_signoff)
    row.resolution_reason = None
    return "accepted"


async def _claim_for(
    conn: Connection, host_id: str, row: store.FeatureRow, stage_execution_id: str
) -> store.ClaimRow:
    claim = await store.claim_by_execution(conn, host_id, row.feature_run_id, stage_execution_id)
    if claim is None:
        raise not_found()
    if row.state == CANCELLED:
        raise refuse(Refusal("feature-cancelled", "the feature run is cancelled"))
    if row.active_stage_execution_id != stage_execution_id:
        raise refuse(
            Refusal(
                "not-active-claim",
                "this stage execution does not own the feature",
                {"activeStageExecutionId": row.active_stage_execution_id},
            )
        )
    return claim


async def accept_stage(
    db: Database, ctx: InvocationContext, args: WorkflowFeatureStageAcceptInput
) -> WorkflowFeatureStageAcceptOutput:
    """Accept (or send to a person) the finished run of the active stage claim."""
    digest = request_digest(TOOL, args, ctx.user_id)
    feature_run_id = str(uuid.UUID(args.feature_run_id))
    stage_execution_id = str(uuid.UUID(args.stage_execution_id))
    async with db.transaction() as conn:
        # The slot before the feature (as cancel): finalize's acceptance releases it.
        await store.lock_slot(conn, ctx.host_id)
        row = await store.select_feature(conn, ctx.host_id, feature_run_id, lock=True)
        if row is None:
            raise not_found()
        replay = await recorded(conn, ctx.host_id, args.operation_id, TOOL, digest)
        if replay is not None:
            return msgspec.convert(replay, WorkflowFeatureStageAcceptOutput)
        settled = await store.claim_by_execution(
            conn, ctx.host_id, feature_run_id, stage_execution_id
        )
        if settled is not None and settled.outcome is not None:
            replayed = settled.outcome | {"outcome": "replay"}
            return msgspec.convert(replayed, WorkflowFeatureStageAcceptOutput)
        claim = await _claim_for(conn, ctx.host_id, row, stage_execution_id)
        run = await store.select_run(conn, ctx.host_id, claim.process_id)
        assert run is not None  # admitted with its claim in one transaction
        if run.state in LIVE:
            raise refuse(
                Refusal(
                    "run-not-completed",
                    "the stage run has not finished",
                    {"runState": run.state, "workflowInstanceId": claim.process_id},
                )
            )
        findings = await store.select_findings(conn, ctx.host_id, feature_run_id)
        verdict = judge(row, claim, run, findings)
        state = _apply(row, claim, verdict)
        if verdict.allocation is not None:
            await store.write_findings(
                conn, ctx.host_id, feature_run_id, list(verdict.allocation.findings.values())
            )
        await store.update_feature(conn, ctx.host_id, row)
        if row.state == COMPLETED:
            await store.release_slot(conn, ctx.host_id, feature_run_id, row.slot_generation)
        fresh = await store.select_feature(conn, ctx.host_id, feature_run_id)
        assert fresh is not None
        document = await feature_document(conn, ctx.host_id, fresh)
        output = {"feature": document, "outcome": "new"}
        await store.settle_claim(conn, ctx.host_id, stage_execution_id, state, output)
        await store.insert_operation(conn, ctx.host_id, args.operation_id, TOOL, digest, output)
    return msgspec.convert(output, WorkflowFeatureStageAcceptOutput)
