"""The data-flow checker at workflow_binding_publish on the pinned version, through POST /mcp."""

from __future__ import annotations

import pytest

from runtime.store import Database
from tests.support.binding_builders import binding, insert_version_row, new_id, publish_args
from tests.support.binding_mcp import publish_definition_text
from tests.support.checker import decision_yaml, optional_read_yaml
from tests.support.invocation import ok, refused, save_head
from tests.support.mcp import McpTestClient
from tests.support.publication import versioned

pytestmark = pytest.mark.requirement("001:CEL Runtime Contract")


async def test_a_version_published_before_the_checker_is_refused_naming_task_and_field(
    owner: McpTestClient, db: Database
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, decision_yaml("workflow.input.applicantId"))
    unchecked = decision_yaml(".applicantId")  # stored as an older service would have
    await insert_version_row(db, wf_def_id, unchecked)
    args = publish_args(binding(wf_def_id, new_id(), unchecked), 0)
    for _ in range(2):  # not stored under the operationId: a retry checks afresh, same answer
        result = await owner.call_tool("workflow_binding_publish", args)
        error = refused(result, "WORKFLOW_INPUT_INVALID")["error"]
        assert "pinned definition version 1.2.0" in error["message"]
        assert "/do/1/finish" in error["message"]
        assert "'applicantId'" in error["message"]
        assert "workflow.input.applicantId" in error["message"]
        assert "requestValidation" not in error["details"]
        problems = error["details"]["problems"]
        assert [(p["pointer"], p["rule"]) for p in problems] == [
            ("/do/1/finish", "data.field-absent")
        ]


async def test_the_refused_binding_leaves_the_tool_head_unchanged(
    owner: McpTestClient, db: Database
) -> None:
    wf_def_id, tool_id = new_id(), new_id()
    await save_head(owner, wf_def_id, decision_yaml("workflow.input.applicantId"))
    unchecked = decision_yaml(".applicantId")
    await insert_version_row(db, wf_def_id, unchecked)
    bad = publish_args(binding(wf_def_id, tool_id, unchecked), 0)
    refused(await owner.call_tool("workflow_binding_publish", bad), "WORKFLOW_INPUT_INVALID")
    fixed = versioned(decision_yaml("workflow.input.applicantId"), "1.3.0")
    await publish_definition_text(owner, fixed, wf_def_id, version="1.3.0")
    good = publish_args(binding(wf_def_id, tool_id, fixed, version="1.3.0"), 0)
    receipt = ok(await owner.call_tool("workflow_binding_publish", good))
    assert (receipt["status"], receipt["aggregateVersion"]) == ("active", 1)
    assert "warnings" not in receipt


async def test_a_version_with_a_maybe_absent_read_binds_with_the_warning_in_the_receipt(
    owner: McpTestClient,
) -> None:
    text = optional_read_yaml()
    wf_def_id = await publish_definition_text(owner, text)
    value = binding(wf_def_id, new_id(), text)
    receipt = ok(await owner.call_tool("workflow_binding_publish", publish_args(value, 0)))
    assert (receipt["result"], receipt["status"]) == ("published", "active")
    [warning] = receipt["warnings"]
    assert (warning["code"], warning["pointer"]) == ("data.field-maybe-absent", "/do/0/greet")
    assert "'nickname'" in warning["message"]
    again = ok(await owner.call_tool("workflow_binding_publish", publish_args(value, 1)))
    assert again["result"] == "unchanged"
    assert again["warnings"] == receipt["warnings"]
