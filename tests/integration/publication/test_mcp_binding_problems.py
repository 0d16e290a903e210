"""Binding publish lists every problem in one pass, blockers first, through POST /mcp."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from runtime.composition.check import check_files
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import (
    binding,
    definition_yaml,
    endpoint_target,
    new_id,
    publish_args,
    write_binding,
)
from tests.support.binding_mcp import (
    Actors,
    actors_of,
    ok,
    publish,
    publish_definition_text,
    refused,
)

API = "https://api.example.com"


@pytest.fixture
def actors(http: httpx.AsyncClient, dev_identity: DevIdentity) -> Actors:
    return actors_of(http, dev_identity)


def _evidence(args: dict[str, Any], section: str) -> dict[str, Any]:
    return {
        "version": 2,
        "discriminator": {"binding": "bindingFields", "reach": "bindingReach"}[section],
        "operationId": args["operationId"],
        "toolName": "workflow_binding_publish",
        "requestSection": section,
    }


def _listed(error: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["pointer"], p["rule"]) for p in error["details"]["problems"]]


def _check_problems(tmp_path: Path, text: str, args: dict[str, Any]) -> list[tuple[str, str]]:
    """What `workflow-mcp check --binding` lists for the same definition and arguments."""
    definition = tmp_path / "definition.yaml"
    definition.write_text(text, encoding="utf-8")
    payload = tmp_path / "binding.yaml"
    payload.write_text(yaml.safe_dump(args), encoding="utf-8")
    [report] = check_files([definition], binding=payload)
    assert report.binding is not None
    return [(p["pointer"], p["rule"]) for p in report.binding["problems"]]


@pytest.mark.requirement("000:Binding publish")
@pytest.mark.requirement("000:Additive binding request-validation evidence (version 2)")
async def test_every_problem_is_listed_at_once_with_the_blockers_before_the_limits(
    actors: Actors, tmp_path: Path
) -> None:
    text = definition_yaml(write=True, evidence=False)  # POST /claims without evidence
    wf_def_id = await publish_definition_text(actors.owner, text)
    value = write_binding(wf_def_id, new_id(), text, invocationMode="async", syncWaitMs=20001)
    value["admissionLimits"]["maximumConcurrentRunsPerUser"] = 30  # over maximumConcurrentRuns
    args = publish_args(value, 0)  # no endpoint target covers the POST
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert _listed(error) == [
        ("/binding/invocationMode", "sync-only"),
        ("/endpointTargets", "endpoint-coverage"),
        ("/do/1/save", "approval-evidence"),
        ("/binding/syncWaitMs", "binding-limit"),
        ("/binding/admissionLimits/maximumConcurrentRunsPerUser", "admission-limits"),
    ]
    assert error["message"] == (
        "workflow-backed Tools are sync only: invocationMode must be sync "
        "(and 4 more problems; see details.problems)"
    )
    messages = [p["message"] for p in error["details"]["problems"]]
    assert f"task /do/1/save calls POST {API}/claims" in messages[1]
    assert "approvalEvidenceDigest" in messages[2]
    # The first problem is bindingFields: stored under the operation and replayed unchanged.
    assert error["details"]["requestValidation"] == _evidence(args, "binding")
    assert refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID") == error
    # check --binding lists the same problems in the same order.
    assert _check_problems(tmp_path, text, args) == _listed(error)


@pytest.mark.requirement("000:Additive binding request-validation evidence (version 2)")
async def test_an_uncovered_call_leads_a_binding_limit_and_the_evidence_names_its_section(
    actors: Actors,
) -> None:
    text = definition_yaml(calls=(("GET", f"{API}/claims"), ("GET", f"{API}/payments")))
    wf_def_id = await publish_definition_text(actors.owner, text)
    value = binding(wf_def_id, new_id(), text, syncWaitMs=20001)
    args = publish_args(value, 0, endpoint_targets=[endpoint_target()])
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert _listed(error) == [
        ("/endpointTargets", "endpoint-coverage"),
        ("/binding/syncWaitMs", "binding-limit"),
    ]
    assert error["message"].startswith(f"task /do/2/call1 calls GET {API}/payments")
    assert error["details"]["requestValidation"] == _evidence(args, "reach")


@pytest.mark.requirement("000:Binding publish")
async def test_state_dependent_problems_are_all_listed_without_evidence_and_fixing_them_publishes(
    actors: Actors,
) -> None:
    text = definition_yaml(write=True, evidence=False, fork_width=6)
    wf_def_id = await publish_definition_text(actors.owner, text)
    tool_id = new_id()
    targets = [endpoint_target()]
    args = publish_args(binding(wf_def_id, tool_id, text), 0, endpoint_targets=targets)
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert _listed(error) == [
        ("/binding/toolAnnotations/readOnly", "effect-matrix"),
        ("/do/1/save", "approval-evidence"),
        ("/binding/runtimeBounds/maximumParallelism", "static-fit"),
    ]
    assert "(and 2 more problems; see details.problems)" in error["message"]
    assert "requestValidation" not in error["details"]
    fixed = definition_yaml(write=True, marker=2)
    wf_def_id = await publish_definition_text(actors.owner, fixed)
    good = publish_args(write_binding(wf_def_id, tool_id, fixed), 0, endpoint_targets=targets)
    assert ok(await publish(actors.owner, good))["status"] == "active"
