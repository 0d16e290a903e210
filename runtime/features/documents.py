"""The wire documents of the ledger (FeatureRun, StageClaim) built from its rows."""

from __future__ import annotations

from typing import Any

from runtime.canonical import timestamp
from runtime.features import store
from runtime.features.findings import Finding
from runtime.features.rules import FeatureView, stage_key
from runtime.store import Connection


def view_of(row: store.FeatureRow) -> FeatureView:
    """What the pure rules read of a feature row."""
    return FeatureView(
        scope=row.scope,
        phases=tuple((p["phaseId"], tuple(p["dependsOn"])) for p in row.phases),
        state=row.state,
        version=row.version,
        active=row.active_stage_execution_id,
        accepted=frozenset(
            stage_key(r["stage"]["kind"], r["stage"].get("phaseId")) for r in row.accepted_results
        ),
        accepted_inputs=row.accepted_inputs,
    )


def claim_document(claim: store.ClaimRow) -> dict[str, Any]:
    """A StageClaim."""
    return {
        "featureRunId": claim.feature_run_id,
        "transitionId": claim.stage_key,
        "predecessorVersion": claim.predecessor_version,
        "stage": claim.stage,
        "stageExecutionId": claim.stage_execution_id,
        "workflowInstanceId": claim.process_id,
        "wfDefId": claim.wf_def_id,
        "definitionDigest": claim.definition_digest,
        "inputs": claim.inputs,
        "requestDigest": claim.request_digest,
        "state": claim.state,
        "claimedAt": timestamp(claim.claimed_ts),
    }


def _finding(f: Finding) -> dict[str, Any]:
    document = {
        "findingId": f.finding_id,
        "reviewId": f.review_id,
        "localId": f.local_id,
        "stageExecutionId": f.stage_execution_id,
        "severity": f.severity,
        "status": f.status,
    }
    if f.alias_of is not None:
        document["aliasOf"] = f.alias_of
    return document


async def feature_document(conn: Connection, host_id: str, row: store.FeatureRow) -> dict[str, Any]:
    """A FeatureRun as the feature tools return it (read inside the caller's transaction)."""
    active = None
    if row.active_stage_execution_id is not None:
        claim = await store.claim_by_execution(
            conn, host_id, row.feature_run_id, row.active_stage_execution_id
        )
        active = None if claim is None else claim_document(claim)
    slot = await store.select_slot(conn, host_id)
    findings = await store.select_findings(conn, host_id, row.feature_run_id)
    document: dict[str, Any] = {
        "schemaVersion": 1,
        "featureRunId": row.feature_run_id,
        "issue": row.issue,
        "version": row.version,
        "state": row.state,
        "scope": row.scope,
        "completionTarget": row.completion_target,
        "requireDesignSignoff": row.require_design_signoff,
        "phases": row.phases,
        "acceptedInputs": row.accepted_inputs,
        "activeClaim": active,
        "acceptedResults": row.accepted_results,
        "budgets": {
            "maximumRemediationRounds": row.maximum_remediation_rounds,
            "maximumTurns": row.maximum_turns,
            "turnsUsed": row.turns_used,
            "remediationUsed": row.remediation_used,
        },
        "slotGeneration": row.slot_generation,
        "slotHeld": slot is not None
        and slot.feature_run_id == row.feature_run_id
        and slot.generation == row.slot_generation,
        "signoff": row.signoff,
        "findings": [_finding(f) for f in findings],
        "createdAt": timestamp(row.created_ts),
        "updatedAt": timestamp(row.updated_ts),
    }
    if row.resolution_reason is not None:
        document["resolutionReason"] = row.resolution_reason
    return document
