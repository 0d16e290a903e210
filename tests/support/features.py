"""Builders for the development-feature ledger tests (issue 36): stage definitions whose
output is a StageResult, feature tool arguments, and waiting for a stage run."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.invocation import ok, save_head
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

REQUIREMENTS = {"id": "artifact:requirements-v1", "digest": "sha256:" + "a" * 64}
ISSUE = {"repository": "example/widgets", "number": 36}
CANDIDATE = "sha256:" + "c" * 64
EVIDENCE = {"id": "artifact:review", "digest": "sha256:" + "e" * 64}


def artifact_digest(kind: str) -> str:
    """The digest a test stage definition reports for its artifact."""
    return (
        "sha256:" + {"design": "d", "plan": "b", "implement-phase": "f", "finalize": "9"}[kind] * 64
    )


def _review(index: int, accepted: bool, findings: str, dispositions: str) -> str:
    return (
        "          - binding:\n"
        '              featureRunId: "${ input.featureRunId }"\n'
        f'              reviewId: "${{ input.reviewIds[{index}] }}"\n'
        '              stageExecutionId: "${ input.stageExecutionId }"\n'
        "              reviewer: claude\n"
        "              sessionId: claude-session\n"
        f"              candidate: {CANDIDATE}\n"
        "              repositories: [widgets]\n"
        f"            accepted: {'true' if accepted else 'false'}\n"
        "            evidence:\n"
        f"              id: {EVIDENCE['id']}\n"
        f"              digest: {EVIDENCE['digest']}\n"
        f"            existingFindings: {dispositions}\n"
        f"            newFindings: {findings}\n"
    )


FINDING = (
    "\n              - localId: local-1\n"
    "                repository: widgets\n"
    "                location: src/lib.py:10\n"
    "                failure: expired authority reaches dispatch\n"
    "                resolution: reject expired authority before dispatch\n"
    "                evidence:\n"
    f"                  id: {EVIDENCE['id']}\n"
    f"                  digest: {EVIDENCE['digest']}\n"
    "                severity: blocking\n"
    "                duplicateOf: null\n"
    "                duplicateReason: null"
)
CLOSE_FIRST = (
    "\n              - findingId: \"${ input.reviewIds[0] + '#local-1' }\"\n"
    "                disposition: closed"
)


FULL_REVIEWED = "sha256:" + "1" * 64


def _coverage(current: str, impact: str) -> str:
    full = "".join(
        f"            - {{reviewer: {who}, sessionId: {who}-s, candidate: {FULL_REVIEWED},"
        " accepted: true}\n"
        for who in ("codex", "claude")
    )
    return (
        "        coverage:\n          fullReviews:\n" + full + "          transitions:\n"
        f"            - {{before: {FULL_REVIEWED}, after: {current}, impact: {impact},"
        " checksPassed: true, reviewer: claude, sessionId: claude-s, accepted: true}\n"
    )


def stage_yaml(kind: str, scenario: str = "clean", name: str = "stage") -> str:
    """A stage definition of kind whose output is a StageResult.

    clean: one accepting review; one-fix: a blocking finding, then a review closing it;
    rejecting: one review that does not accept; malformed: an output with an unknown field;
    wrong-inputs: a clean result that names no input bindings; covered / broad: a clean result
    with review coverage whose one transition after the full reviews is local / broad.
    """
    if scenario == "clean":
        reviews = _review(0, True, "[]", "[]")
    elif scenario == "one-fix":
        reviews = _review(0, False, FINDING, "[]") + _review(1, True, "[]", CLOSE_FIRST)
    elif scenario == "rejecting":
        reviews = _review(0, False, FINDING, "[]")
    else:
        reviews = _review(0, True, "[]", "[]")
    extra = "        surprise: true\n" if scenario == "malformed" else ""
    if scenario in ("covered", "broad"):
        extra = _coverage(artifact_digest(kind), "local" if scenario == "covered" else "broad")
    inputs = "{}" if scenario == "wrong-inputs" else '"${ input.inputs }"'
    remediations = (
        "\n          - turnId: fix-1\n"
        f"            candidate: {CANDIDATE}\n"
        "            findingId: \"${ input.reviewIds[0] + '#local-1' }\"\n"
        "            changedPaths: [widgets/src/lib.py]\n"
        "            evidence:\n"
        f"              id: {EVIDENCE['id']}\n"
        f"              digest: {EVIDENCE['digest']}\n"
        "            dispute: false"
        if scenario == "one-fix"
        else " []"
    )
    return (
        "document:\n"
        '  dsl: "1.0.3"\n'
        "  namespace: devflow\n"
        f"  name: {name}\n"
        '  version: "1.0.0"\n'
        "  metadata:\n"
        f"    devflowStage: {kind}\n"
        "input:\n"
        "  schema:\n"
        "    format: json\n"
        "    document:\n"
        "      type: object\n"
        "do:\n"
        "  - result:\n"
        "      set:\n"
        "        schemaVersion: 1\n"
        '        featureRunId: "${ input.featureRunId }"\n'
        '        stageExecutionId: "${ input.stageExecutionId }"\n'
        '        stage: "${ input.stage }"\n'
        f"        inputs: {inputs}\n"
        "        artifact:\n"
        f"          id: artifact:{kind}\n"
        f"          digest: {artifact_digest(kind)}\n"
        "        reviews:\n" + reviews + f"        remediations:{remediations}\n" + extra
    )


async def save_stage(owner: McpTestClient, kind: str, scenario: str = "clean") -> str:
    """Save a stage definition head; its wfDefId."""
    wf_def_id = str(uuid.uuid4())
    await save_head(owner, wf_def_id, stage_yaml(kind, scenario))
    return wf_def_id


def create_args(**extra: Any) -> dict[str, Any]:
    """workflow_feature_create arguments (implementation, one phase p1) with a new operation id."""
    return {
        "operationId": str(uuid.uuid4()),
        "issue": ISSUE,
        "scope": "implementation",
        "completionTarget": "pr-ready",
        "phases": [{"phaseId": "p1", "dependsOn": []}],
        "requirements": REQUIREMENTS,
    } | extra


def start_args(
    feature: str, version: int, kind: str, wf_def_id: str, phase: str | None = None, **extra: Any
) -> dict[str, Any]:
    """workflow_feature_stage_start arguments with the bindings the stage needs."""
    inputs: dict[str, Any] = {"requirements": REQUIREMENTS}
    if kind != "design":
        inputs["design"] = {"id": "artifact:design", "digest": artifact_digest("design")}
    return {
        "operationId": str(uuid.uuid4()),
        "featureRunId": feature,
        "expectedVersion": version,
        "stage": {"kind": kind, "phaseId": phase},
        "wfDefId": wf_def_id,
        "inputs": inputs,
    } | extra


def accept_args(feature: str, stage_execution_id: str) -> dict[str, Any]:
    """workflow_feature_stage_accept arguments with a new operation id."""
    return {
        "operationId": str(uuid.uuid4()),
        "featureRunId": feature,
        "stageExecutionId": stage_execution_id,
    }


async def run_finished(client: McpTestClient, instance_id: str) -> str:
    """Wait (bounded) until a run is terminal; its state (a failed run's with its error)."""
    handle = {"workflowInstanceId": instance_id}

    async def terminal() -> bool:
        status = ok(await client.call_tool("workflow_get_status", handle))
        return status["state"] in ("COMPLETED", "FAILED", "CANCELLED")

    await wait_until(terminal, what=f"run {instance_id} finished", within_s=30)
    state = str(ok(await client.call_tool("workflow_get_status", handle))["state"])
    if state != "FAILED":
        return state
    result = await client.call_tool("workflow_get_result", handle)
    return f"FAILED: {result['structuredContent']}"


async def run_stage(
    client: McpTestClient,
    feature: str,
    version: int,
    kind: str,
    wf_def_id: str,
    phase: str | None = None,
) -> dict[str, Any]:
    """Start a stage, wait for its run and accept it; the accept's output."""
    started = ok(
        await client.call_tool(
            "workflow_feature_stage_start", start_args(feature, version, kind, wf_def_id, phase)
        )
    )
    claim = started["claim"]
    assert await run_finished(client, claim["workflowInstanceId"]) == "COMPLETED"
    return ok(
        await client.call_tool(
            "workflow_feature_stage_accept", accept_args(feature, claim["stageExecutionId"])
        )
    )
