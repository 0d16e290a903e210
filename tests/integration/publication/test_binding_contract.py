"""Binding service results match the catalog's output schemas and error evidence shapes."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from runtime.errors import WorkflowError
from runtime.store import Database
from tests.support.binding_builders import (
    HOST,
    author_ctx,
    binding,
    definition_yaml,
    endpoint_target,
    new_id,
    owner_ctx,
    publish_args,
    publish_version,
    save_owner,
    write_binding,
)
from tests.support.service_calls import (
    decide_binding,
    get_binding,
    list_bindings,
    publish_binding,
    retire_binding,
    revoke_binding,
)

CATALOG = Path(__file__).resolve().parents[3] / "generated" / "catalog.json"


@cache
def _tools() -> dict[str, Any]:
    return {tool["name"]: tool for tool in json.loads(CATALOG.read_text())["tools"]}


def _check_output(tool: str, value: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(_tools()[tool]["outputSchema"]).validate(value)


async def test_every_binding_result_matches_its_output_schema(db: Database) -> None:
    wf_def_id = new_id()
    await save_owner(db, wf_def_id)
    text = definition_yaml(write=True)
    await publish_version(db, wf_def_id, text=text)
    tool_id = new_id()
    value = write_binding(wf_def_id, tool_id, text)
    active = await publish_binding(
        db, owner_ctx(), publish_args(value, 0, endpoint_targets=[endpoint_target()])
    )
    _check_output("workflow_binding_publish", active)
    pending = await publish_binding(
        db,
        author_ctx(),
        publish_args({**value, "totalDeadlineMs": 25000}, 1, endpoint_targets=[endpoint_target()]),
    )
    _check_output("workflow_binding_publish", pending)
    _check_output(
        "workflow_binding_get",
        await get_binding(db, owner_ctx(), {"hostId": HOST, "toolId": tool_id}),
    )
    decided = await decide_binding(
        db,
        owner_ctx(),
        {
            "hostId": HOST,
            "bindingId": pending["bindingId"],
            "expectedBindingDigest": pending["bindingDigest"],
            "decision": "approve",
            "comment": "ok",
            "operationId": new_id(),
        },
    )
    _check_output("workflow_binding_decide", decided)
    _check_output(
        "workflow_binding_list",
        await list_bindings(db, owner_ctx(), {"hostId": HOST, "role": "owner"}),
    )
    revoked = await revoke_binding(
        db,
        owner_ctx(),
        {
            "hostId": HOST,
            "bindingId": pending["bindingId"],
            "expectedBindingDigest": pending["bindingDigest"],
            "comment": "stop",
            "operationId": new_id(),
        },
    )
    _check_output("workflow_binding_revoke", revoked)
    retired = await retire_binding(
        db,
        author_ctx(),
        {"hostId": HOST, "toolId": tool_id, "expectedAggregateVersion": 4, "operationId": new_id()},
    )
    _check_output("workflow_binding_retire", retired)
    _check_output(
        "workflow_binding_get",
        await get_binding(db, owner_ctx(), {"hostId": HOST, "toolId": tool_id}),
    )


async def test_request_validation_errors_match_the_error_result_schema(db: Database) -> None:
    schemas = json.loads(
        (CATALOG.parent.parent / "contracts" / "workflow-admin" / "schemas.json").read_text()
    )
    validator = jsonschema.Draft202012Validator({**schemas, "$ref": "#/$defs/WorkflowErrorResult"})
    wf_def_id = new_id()
    text = definition_yaml()
    for args in (
        publish_args(binding(wf_def_id, new_id(), text), -1),
        publish_args(binding(wf_def_id, new_id(), text, invocationMode="async"), 0),
        publish_args(
            binding(wf_def_id, new_id(), text), 0, endpoint_targets=[endpoint_target()] * 2
        ),
    ):
        with pytest.raises(WorkflowError) as caught:
            await publish_binding(db, owner_ctx(), args)
        validator.validate(caught.value.to_structured())
