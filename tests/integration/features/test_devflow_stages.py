"""The devflow example stage workflows (examples/devflow/) with the scripted agents, through
POST /mcp with real tokens and an in-process executor (issue 36 item 4)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runtime.collaborators import Services
from runtime.execution import ExecutionSettings
from runtime.scheduler import Executor
from tests.support.devflow import RunningAgents, running_agents, stage_text
from tests.support.features import accept_args, create_args, run_finished, start_args
from tests.support.invocation import ok, running_executor, save_head
from tests.support.mcp import McpTestClient


async def _stages(owner: McpTestClient, agents: RunningAgents) -> dict[str, str]:
    ids = {}
    for kind in ("design", "implement-phase", "finalize"):
        ids[kind] = str(uuid.uuid4())
        await save_head(owner, ids[kind], stage_text(kind, agents.origin))
    return ids


async def _executor(services: Services, agents: RunningAgents) -> AsyncIterator[Executor]:
    async with running_executor(services, ExecutionSettings(http_allowlist=[agents.origin])) as ex:
        yield ex


async def _stage(
    caller: McpTestClient,
    feature: dict[str, Any],
    kind: str,
    wf_def_id: str,
    phase: str | None = None,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    args = start_args(feature["featureRunId"], feature["version"], kind, wf_def_id, phase)
    if inputs is not None:
        args["inputs"] = inputs
    claim = ok(await caller.call_tool("workflow_feature_stage_start", args))["claim"]
    assert await run_finished(caller, claim["workflowInstanceId"]) == "COMPLETED"
    accept = accept_args(feature["featureRunId"], claim["stageExecutionId"])
    return dict(ok(await caller.call_tool("workflow_feature_stage_accept", accept))["feature"])


@pytest.mark.requirement("004:F8")
async def test_the_example_stages_take_a_feature_to_completed_after_one_fix_each(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    with running_agents("accept-after-one-fix") as agents:
        stages = await _stages(owner, agents)
        async for _ in _executor(services, agents):
            feature = ok(await caller.call_tool("workflow_feature_create", create_args()))[
                "feature"
            ]
            feature = await _stage(caller, feature, "design", stages["design"])
            assert (feature["state"], feature["version"]) == ("ready-for-next-stage", 2)
            design = feature["acceptedInputs"]["design"]
            inputs = {"requirements": feature["acceptedInputs"]["requirements"], "design": design}
            feature = await _stage(
                caller, feature, "implement-phase", stages["implement-phase"], "p1", inputs
            )
            feature = await _stage(caller, feature, "finalize", stages["finalize"], None, inputs)
    assert (feature["state"], feature["slotHeld"], feature["activeClaim"]) == (
        "completed",
        False,
        None,
    )
    assert feature["budgets"]["remediationUsed"] == {
        "design": 1,
        "implement-phase:p1": 1,
        "finalize": 1,
    }
    assert [f["status"] for f in feature["findings"]] == ["closed"] * 3
    roles = [job["role"] for job in agents.jobs()]
    assert roles == ["author", "reviewer"] * 6


@pytest.mark.requirement("004:F17")
async def test_never_accept_needs_a_person_after_three_rounds_and_a_reopen_dispatches_none(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    with running_agents("never-accept") as agents:
        stages = await _stages(owner, agents)
        async for _ in _executor(services, agents):
            feature = ok(await caller.call_tool("workflow_feature_create", create_args()))[
                "feature"
            ]
            feature = await _stage(caller, feature, "design", stages["design"])
            assert feature["state"] == "human-resolution-required"
            assert feature["budgets"]["remediationUsed"] == {"design": 3}
            first = [j for j in agents.jobs() if j["role"] == "reviewer"]
            # The initial review and three remediation rounds, each a Workflow-allocated id.
            assert [j["round"] for j in first] == [0, 1, 2, 3]
            reopen = {
                "operationId": str(uuid.uuid4()),
                "featureRunId": feature["featureRunId"],
                "decision": "reopen",
            }
            feature = ok(await caller.call_tool("workflow_feature_decide", reopen))["feature"]
            assert feature["budgets"]["remediationUsed"] == {"design": 3}
            feature = await _stage(caller, feature, "design", stages["design"])
    assert feature["state"] == "human-resolution-required"
    assert feature["budgets"]["remediationUsed"] == {"design": 3}
    later = [j for j in agents.jobs() if j["role"] == "reviewer"][4:]
    # The reopened stage gets its initial review only: no remediation round is left.
    assert [j["round"] for j in later] == [0]


@pytest.mark.requirement("004:F16")
async def test_a_malformed_review_ends_in_human_resolution(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    with running_agents("malformed") as agents:
        stages = await _stages(owner, agents)
        async for _ in _executor(services, agents):
            feature = ok(await caller.call_tool("workflow_feature_create", create_args()))[
                "feature"
            ]
            feature = await _stage(caller, feature, "design", stages["design"])
    assert feature["state"] == "human-resolution-required"
    assert "not a valid StageResult" in feature["resolutionReason"]
