"""The data-flow checker at workflow_definition_publish, through POST /mcp."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.composition.check import check_definition
from tests.support.binding_builders import definition_yaml, new_id
from tests.support.checker import decision_yaml, optional_read_yaml, publish_arguments
from tests.support.invocation import (
    invoke_args,
    ok,
    publish_tool,
    refused,
    save_head,
    until_settled,
)
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("001:CEL Runtime Contract")


async def test_a_read_of_a_field_no_path_carries_is_refused_naming_task_field_and_the_fix(
    owner: McpTestClient,
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    result = await owner.call_tool(
        "workflow_definition_publish", publish_arguments(wf_def_id, decision_yaml(".applicantId"))
    )
    error = refused(result, "WORKFLOW_INPUT_INVALID")["error"]
    assert "/do/1/finish" in error["message"]
    assert "'applicantId'" in error["message"]
    assert "workflow.input.applicantId" in error["message"]
    problems = error["details"]["problems"]
    assert [(p["pointer"], p["rule"]) for p in problems] == [("/do/1/finish", "data.field-absent")]
    assert "status (data)" in problems[0]["message"]  # what is available there


async def test_the_fixed_definition_publishes_and_returns_the_field_in_its_output(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    tool = await publish_tool(owner, text=decision_yaml("workflow.input.applicantId"))
    args = invoke_args(tool, {"applicantId": "A-1"})
    body = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", args)))
    assert body["status"] == "completed", body
    assert body["output"] == {"applicantId": "A-1", "status": "APPROVED"}


async def test_a_field_some_path_may_lack_publishes_with_a_warning_in_the_receipt(
    owner: McpTestClient,
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    result = await owner.call_tool(
        "workflow_definition_publish", publish_arguments(wf_def_id, optional_read_yaml())
    )
    receipt = ok(result)
    assert receipt["result"] == "published"
    [warning] = receipt["warnings"]
    assert warning["code"] == "data.field-maybe-absent"
    assert warning["pointer"] == "/do/0/greet"
    assert "'nickname'" in warning["message"]


async def test_a_clean_definition_has_no_warnings_field(owner: McpTestClient) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    text = decision_yaml("workflow.input.applicantId")
    receipt = ok(
        await owner.call_tool("workflow_definition_publish", publish_arguments(wf_def_id, text))
    )
    assert "warnings" not in receipt


async def test_publish_returns_the_parser_warnings_check_prints(
    owner: McpTestClient, tmp_path: Path
) -> None:
    text = definition_yaml().replace("marker: 1", 'summary: "${ .content }"')
    path = tmp_path / "reads-outside-data.yaml"
    path.write_text(text, encoding="utf-8")
    report, _ = check_definition(path)
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    arguments = publish_arguments(wf_def_id, text)
    receipt = ok(await owner.call_tool("workflow_definition_publish", arguments))
    assert receipt["result"] == "published"
    assert receipt["warnings"] == report.warnings
    [warning] = receipt["warnings"]
    assert warning["code"] == "definition.warning"
    assert warning["pointer"] == "/do/0/first"
    assert "undeclared identifier 'content'" in warning["message"]
