"""Refusals that teach, through POST /mcp: every problem at once, each naming what to fix."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.canonical import definition_digest
from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.binding_builders import HOST, definition_yaml, new_id
from tests.support.invocation import client, invoke_args, publish_tool, refused, save_head
from tests.support.mcp import McpTestClient
from tests.support.publication import publish_args

MANY_PROBLEMS = (
    "document:\n"
    '  dsl: "1.0.3"\n'
    "  namespace: claims\n"
    "  name: many-problems\n"
    '  version: "1.0.0"\n'
    "metadata:\n"
    "  team: claims\n"
    "do:\n"
    "  - compute:\n"
    "      set:\n"
    '        total: "${ 1 + }"\n'
    "  - fetch:\n"
    "      call: http\n"
    "      with:\n"
    "        method: get\n"
    '        endpoint: "https://api.example.com/claims/${ .claimId }"\n'
    "  - approve:\n"
    "      listen:\n"
    "        to: approve\n"
    "  - legacy:\n"
    "      call: grpc\n"
)


async def _publish_refusal(client: McpTestClient, text: str, version: str) -> dict[str, Any]:
    args = {**publish_args(new_id(), version, host_id=HOST), "definition": text}
    args["expectedDefinitionDigest"] = definition_digest(text)
    result = await client.call_tool("workflow_definition_publish", args)
    return refused(result, "WORKFLOW_INPUT_INVALID")["error"]


async def _versions(db: Database) -> int:
    async with db.connection() as conn:
        cursor = await conn.execute("SELECT count(*) AS n FROM wf_definition_version_t")
        row = await cursor.fetchone()
    assert row is not None
    return int(row["n"])


@pytest.mark.requirement("000:Definition publish")
async def test_publish_lists_every_problem_with_the_blockers_first(
    owner: McpTestClient, db: Database
) -> None:
    error = await _publish_refusal(owner, MANY_PROBLEMS, "1.0.0")
    problems = error["details"]["problems"]
    assert [(p["pointer"], p["rule"]) for p in problems] == [
        ("/do/2/approve", "unsupported-task-kind"),
        ("/do/3/legacy", "rejected-call-kind"),
        ("/do/1/fetch", "endpoint"),
        ("/do/0/compute", "expression"),
        ("/metadata", "unknown-field"),
    ]
    assert error["message"].startswith(
        "definition is invalid: /do/2/approve: task kind `listen` is not supported"
    )
    assert "4 more problems" in error["message"]
    assert await _versions(db) == 0


async def test_a_refused_task_kind_names_the_kind_and_why_it_is_refused(
    owner: McpTestClient,
) -> None:
    error = await _publish_refusal(owner, MANY_PROBLEMS, "1.0.0")
    [listen] = [p for p in error["details"]["problems"] if p["pointer"] == "/do/2/approve"]
    assert "`listen`" in listen["message"]
    assert "waits for outside events" in listen["message"]


async def test_an_expression_inside_a_uri_points_to_a_uri_template(owner: McpTestClient) -> None:
    error = await _publish_refusal(owner, MANY_PROBLEMS, "1.0.0")
    [uri] = [p for p in error["details"]["problems"] if p["pointer"] == "/do/1/fetch"]
    assert "${ }" in uri["message"] and "inside a URI" in uri["message"]
    assert "URI template placeholder `{name}`" in uri["message"]
    assert "whole-string expression" in uri["message"]


async def test_a_compile_error_names_the_expression(owner: McpTestClient) -> None:
    error = await _publish_refusal(owner, MANY_PROBLEMS, "1.0.0")
    [compute] = [p for p in error["details"]["problems"] if p["pointer"] == "/do/0/compute"]
    assert "'1 +'" in compute["message"]


@pytest.mark.requirement("000:Definition publish")
async def test_a_document_version_other_than_the_version_argument_is_refused_naming_both(
    owner: McpTestClient, db: Database
) -> None:
    text = definition_yaml()  # document.version 1.2.0
    error = await _publish_refusal(owner, text, "2.0.0")
    assert "'1.2.0'" in error["message"] and "'2.0.0'" in error["message"]
    assert error["details"] == {"documentVersion": "1.2.0", "version": "2.0.0"}
    assert await _versions(db) == 0


async def test_start_of_an_invalid_saved_head_carries_the_problems_publish_would(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, MANY_PROBLEMS)
    published = await _publish_refusal(owner, MANY_PROBLEMS, "1.0.0")
    start = {"wfDefId": wf_def_id, "input": {"claimId": "C-1"}}
    body = refused(await caller.call_tool("workflow_start", start), "WORKFLOW_START_REJECTED")
    assert body["error"]["details"]["problems"] == published["details"]["problems"]
    assert "task kind `listen` is not supported" in body["error"]["message"]


@pytest.mark.requirement("000:Operator setup")
async def test_a_refused_role_names_the_roles_that_are_allowed(
    http: Any, dev_identity: DevIdentity
) -> None:
    outsider = client(http, dev_identity, roles=("genai-user",))
    result = await outsider.call_tool(
        "workflow_definition_publish", publish_args(new_id(), host_id=HOST)
    )
    message = refused(result, "WORKFLOW_POLICY_DENIED")["error"]["message"]
    assert "allowed roles: admin, genai-admin, host-admin, workflow-admin" in message


async def test_a_missing_required_input_field_is_named(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    text = definition_yaml().replace(
        "      type: object\n", "      type: object\n      required: [claimId, creditScore]\n"
    )
    tool = await publish_tool(owner, text=text)
    result = await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-1"}))
    message = refused(result, "WORKFLOW_INPUT_INVALID")["error"]["message"]
    assert "$.creditScore is required" in message


async def test_a_failing_expression_names_the_expression_and_the_task(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    gate = '  - gate:\n      if: "${ workflow.input.claimId }"\n      set:\n        gated: true\n'
    tool = await publish_tool(owner, text=definition_yaml(extra_task=gate))
    result = await caller.call_tool("workflow_invoke", invoke_args(tool))
    error = refused(result, "WORKFLOW_TASK_FAILED")["error"]
    assert "task /do/1/gate failed with an expression error" in error["message"]
    assert "'workflow.input.claimId'" in error["message"]
    assert "must return bool" in error["message"]
