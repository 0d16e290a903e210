"""Endpoint coverage at binding publish through POST /mcp (dsl-profile §6, seed 000)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import (
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

pytestmark = pytest.mark.requirement("000:Binding publish")

API = "https://api.example.com"


@pytest.fixture
def actors(http: httpx.AsyncClient, dev_identity: DevIdentity) -> Actors:
    return actors_of(http, dev_identity)


async def _publish_calls(
    actors: Actors, calls: tuple[tuple[str, str], ...], targets: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    text = definition_yaml(calls=calls)
    wf_def_id = await publish_definition_text(actors.owner, text)
    args = publish_args(write_binding(wf_def_id, new_id(), text), 0, endpoint_targets=targets)
    return args, await publish(actors.owner, args)


def _reach_evidence(args: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": 2,
        "discriminator": "bindingReach",
        "operationId": args["operationId"],
        "toolName": "workflow_binding_publish",
        "requestSection": "reach",
    }


async def test_a_call_no_target_covers_is_refused_naming_task_uri_and_method(
    actors: Actors,
) -> None:
    calls = (("GET", f"{API}/claims"), ("POST", f"{API}/payments"))
    args, result = await _publish_calls(actors, calls, [endpoint_target()])
    error = refused(result, "WORKFLOW_INPUT_INVALID")
    assert "/do/2/call1" in error["message"]
    assert f"POST {API}/payments" in error["message"]
    assert error["details"]["requestValidation"] == _reach_evidence(args)
    # Stored under the operation: a retry replays the same rejection.
    assert refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID") == error


async def test_a_target_without_the_calls_method_is_refused(actors: Actors) -> None:
    calls = (("DELETE", f"{API}/claims"),)
    args, result = await _publish_calls(actors, calls, [endpoint_target()])
    error = refused(result, "WORKFLOW_INPUT_INVALID")
    assert f"DELETE {API}/claims" in error["message"] and "method" in error["message"]
    assert error["details"]["requestValidation"] == _reach_evidence(args)


async def test_a_target_narrower_than_the_calls_template_is_refused(actors: Actors) -> None:
    calls = (("GET", f"{API}/claims/{{claimId}}"),)
    narrow = endpoint_target(uri=f"{API}/claims/C-1001")
    _, result = await _publish_calls(actors, calls, [narrow])
    error = refused(result, "WORKFLOW_INPUT_INVALID")
    assert f"GET {API}/claims/{{claimId}}" in error["message"]


async def test_another_origin_does_not_cover_a_call(actors: Actors) -> None:
    calls = (("GET", f"{API}/claims"),)
    other = endpoint_target(uri="https://api.example.com:8443/claims")
    _, result = await _publish_calls(actors, calls, [other])
    refused(result, "WORKFLOW_INPUT_INVALID")


async def test_targets_covering_every_call_by_template_and_method_publish_active(
    actors: Actors,
) -> None:
    calls = (
        ("GET", f"{API}/claims/{{claimId}}"),
        ("GET", f"{API}/claims/C-7/notes"),
        ("post", f"{API}/claims"),
    )
    targets = [
        endpoint_target("claim", f"{API}/claims/{{id}}", methods=("GET",)),
        endpoint_target("notes", f"{API}/claims/{{id}}/notes", methods=("GET",)),
        endpoint_target("claims", f"{API}/claims", methods=("POST",)),
    ]
    _, result = await _publish_calls(actors, calls, targets)
    assert ok(result)["status"] == "active"
