"""bindingFields evidence for catalog-validator failures of the binding (seed 000 F2, version 2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import binding, definition_yaml, new_id, publish_args
from tests.support.binding_mcp import Actors, actors_of, publish, publish_definition_text, refused

pytestmark = pytest.mark.requirement("000:Additive binding request-validation evidence (version 2)")

Change = Callable[[dict[str, Any]], None]


@pytest.fixture
def actors(http: httpx.AsyncClient, dev_identity: DevIdentity) -> Actors:
    return actors_of(http, dev_identity)


def _drop(member: str) -> Change:
    return lambda value: value.pop(member)


def _put(member: str, replacement: Any) -> Change:
    return lambda value: value.__setitem__(member, replacement)


def _bounds(member: str, replacement: Any) -> Change:
    return lambda value: value["runtimeBounds"].__setitem__(member, replacement)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_put("executionClass", "urgent"), id="enum"),
        pytest.param(_put("resultTextMode", "yaml"), id="enum-text-mode"),
        pytest.param(_put("sourceBindingId", "not-a-uuid"), id="pattern"),
        pytest.param(_drop("totalDeadlineMs"), id="required-member"),
        pytest.param(_bounds("maximumTaskAttempts", None), id="required-bound-type"),
        pytest.param(_drop("definitionDigest"), id="required-digest"),
        pytest.param(_put("policyDigest", "md5:" + "c" * 32), id="digest-format"),
        pytest.param(_put("definitionDigest", "sha256:" + "C" * 64), id="digest-upper-hex"),
        pytest.param(_put("schemaDigest", "sha256:" + "c" * 63), id="digest-length"),
    ],
)
async def test_a_binding_field_failure_is_stored_with_binding_fields_evidence(
    actors: Actors, change: Change
) -> None:
    text = definition_yaml()
    wf_def_id = await publish_definition_text(actors.owner, text)
    args = publish_args(binding(wf_def_id, new_id(), text), 0)
    change(args["binding"])
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert error["afterEffect"] is False
    assert error["details"]["requestValidation"] == {
        "version": 2,
        "discriminator": "bindingFields",
        "operationId": args["operationId"],
        "toolName": "workflow_binding_publish",
        "requestSection": "binding",
    }
    # Stored under the operation id: a retry of the same request replays it unchanged.
    assert refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID") == error
