"""Every problem at once through POST /mcp: refused tool arguments and owner approval (issue 11).

The generated validator still decides and names the first problem; the refusal then lists
the others in details.problems, and an approval that meets several problems names them all.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import (
    HOST,
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
    decide,
    get,
    ok,
    publish,
    publish_definition_text,
    refused,
)


@pytest.fixture
def actors(http: httpx.AsyncClient, dev_identity: DevIdentity) -> Actors:
    return actors_of(http, dev_identity)


def _listed(error: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p["pointer"], p["rule"]) for p in error["details"]["problems"]]


@pytest.mark.requirement("000:Error envelopes")
async def test_arguments_with_three_schema_mistakes_list_all_three_the_first_one_first(
    actors: Actors,
) -> None:
    args = {
        "hostId": HOST,
        "bindingId": new_id(),
        "expectedBindingDigest": "sha256:" + "0" * 64,
        "decision": "maybe",
        "comment": "fine",
        "bogus": True,
    }  # operationId missing, decision outside its enum, an unknown member
    result = await actors.owner.call_tool("workflow_binding_decide", args)
    error = refused(result, "WORKFLOW_INPUT_INVALID")
    # The first problem is the one the generated validator names, as before.
    assert error["message"] == (
        "invalid arguments: data must contain ['operationId'] properties "
        "(and 2 more problems; see details.problems)"
    )
    assert error["details"]["validation"] == {"path": "data", "rule": "required"}
    assert _listed(error) == [
        ("/operationId", "required"),
        ("/bogus", "additionalProperties"),
        ("/decision", "enum"),
    ]
    messages = [p["message"] for p in error["details"]["problems"]]
    assert messages == [
        "data.operationId is required",
        "data.bogus is not allowed (unknown field)",
        'data.decision must be one of ["approve","reject"]',
    ]


@pytest.mark.requirement("000:Error envelopes")
async def test_shape_problems_are_listed_before_bounds_and_caller_values_are_never_echoed(
    actors: Actors,
) -> None:
    secret = "s3cr3t-" + "x" * 3000
    args = {
        "hostId": HOST,
        "bindingId": secret,  # too long and not a UUID
        "expectedBindingDigest": 7,  # the wrong type
        "decision": "approve",
        "operationId": new_id(),
    }
    error = refused(
        await actors.owner.call_tool("workflow_binding_decide", args), "WORKFLOW_INPUT_INVALID"
    )
    assert error["message"].startswith(
        "invalid arguments: data.bindingId must be shorter than or equal to 36 characters "
        "(and 2 more problems"
    )
    assert _listed(error) == [
        ("/bindingId", "maxLength"),
        ("/expectedBindingDigest", "type"),
        ("/bindingId", "pattern"),
    ]
    assert "s3cr3t" not in str(error["details"]["problems"])


@pytest.mark.requirement("000:Error envelopes")
async def test_a_single_schema_mistake_keeps_its_message_and_lists_itself(
    actors: Actors,
) -> None:
    args = {"hostId": HOST, "toolId": "Z" * 36}  # the right length, not a UUID
    error = refused(
        await actors.owner.call_tool("workflow_binding_get", args), "WORKFLOW_INPUT_INVALID"
    )
    first = (
        "data.toolId must match pattern "
        "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
    )
    assert error["message"] == f"invalid arguments: {first}"
    assert error["details"]["problems"] == [
        {"pointer": "/toolId", "rule": "pattern", "message": first}
    ]


@pytest.mark.requirement("000:Additive binding request-validation evidence (version 2)")
async def test_a_stored_binding_refusal_lists_every_schema_problem_and_keeps_its_evidence(
    actors: Actors,
) -> None:
    text = definition_yaml()
    wf_def_id = await publish_definition_text(actors.owner, text)
    args = publish_args(binding(wf_def_id, new_id(), text), 0)
    args["binding"]["executionClass"] = "urgent"
    args["binding"]["resultTextMode"] = "yaml"
    args["endpointTargets"] = [{**endpoint_target(), "endpointUri": 5}]
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert error["details"]["requestValidation"] == {
        "version": 2,
        "discriminator": "bindingFields",
        "operationId": args["operationId"],
        "toolName": "workflow_binding_publish",
        "requestSection": "binding",
    }
    # The validator's own first, then shape (a wrong type) before values.
    assert _listed(error) == [
        ("/binding/executionClass", "enum"),
        ("/endpointTargets/0/endpointUri", "type"),
        ("/binding/resultTextMode", "enum"),
    ]
    assert error["message"].endswith("(and 2 more problems; see details.problems)")
    # Stored under the operation id and replayed unchanged, problems and all.
    assert refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID") == error


@pytest.mark.requirement("000:Workflow owner approval")
async def test_an_approval_that_meets_two_problems_lists_both(
    actors: Actors, services: Services
) -> None:
    text = definition_yaml(write=True, fork_width=3)
    wf_def_id = await publish_definition_text(actors.owner, text)
    args = publish_args(
        write_binding(wf_def_id, new_id(), text), 0, endpoint_targets=[endpoint_target()]
    )
    pending = ok(await publish(actors.author, args))
    assert pending["status"] == "pendingApproval"
    # Between publish and approval the operator narrows the destinations and the fork ceiling.
    services.settings.publication.destinations.allowed_hosts = ["other.example.org"]
    services.settings.execution.maximum_parallelism = 2
    error = refused(await decide(actors.owner, pending, "approve"), "WORKFLOW_INPUT_INVALID")
    assert _listed(error) == [
        ("/endpointTargets/0/endpointUri", "destination"),
        ("/do/2/fan", "service-parallelism"),
    ]
    assert error["message"].startswith("the revision no longer passes validation: ")
    assert "destination policy" in error["message"]
    assert error["message"].endswith("(and 1 more problems; see details.problems)")
    assert "execution.maximum_parallelism 2" in error["details"]["problems"][1]["message"]
    state = await get(actors.owner, pending["toolId"])
    assert state["revision"]["status"] == "pendingApproval"
    # With the ceiling restored only the destination is left: a policy refusal, as before.
    services.settings.execution.maximum_parallelism = 16
    error = refused(await decide(actors.owner, pending, "approve"), "WORKFLOW_POLICY_DENIED")
    assert _listed(error) == [("/endpointTargets/0/endpointUri", "destination")]
