"""Hostile inputs have a bounded cost: regular expressions, CEL size amplification, huge
definitions. Each is refused or stopped, and the service keeps answering while it runs."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from runtime.canonical import definition_digest
from runtime.publication.definition_limits import DefinitionLimits
from runtime.settings import Settings
from tests.support.binding_builders import (
    HOST,
    OWNER,
    OWNER_POSITION,
    binding,
    definition_yaml,
    new_id,
    publish_args,
)
from tests.support.hostile import assert_responsive, while_probing
from tests.support.invocation import invoke_args, ok, publish_tool, refused, save_head
from tests.support.mcp import McpTestClient

REDOS_SCHEMA = {
    "type": "object",
    "properties": {"claimId": {"type": "string", "pattern": "^(a+)+$"}},
}
# Python's backtracking engine needs about 2**40 steps to refuse this; RE2 needs one pass.
REDOS_INPUT = {"claimId": "a" * 40 + "!"}
AMPLIFY_TASK = (
    "  - amplify:\n      set:\n        big: "
    '"${ workflow.input.items.map(x, workflow.input.s + workflow.input.s'
    ' + workflow.input.s + workflow.input.s) }"\n'
)
AMPLIFY_INPUT = {"s": "x" * 50_000, "items": list(range(400))}
# The whole map would hold 80 MB of strings (170 MB measured before the meter counted bytes).
AMPLIFY_PEAK_BOUND = 64 * 1024 * 1024


def publish_definition_args(wf_def_id: str, text: str, version: str = "1.2.0") -> dict[str, Any]:
    return {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "namespace": "claims",
        "name": "summarize-claim",
        "version": version,
        "definition": text,
        "expectedDefinitionDigest": "sha256:" + "0" * 64,
        "bindingApproval": "carryOver",
        "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
        "operationId": new_id(),
    }


def many_tasks(count: int) -> str:
    tasks = "".join(f"  - t{i}:\n      set:\n        x: 1\n" for i in range(count))
    return 'document: {dsl: "1.0.3", namespace: claims, name: big, version: "1.2.0"}\ndo:\n' + (
        tasks
    )


@pytest.mark.timeout(120)
async def test_a_catastrophic_pattern_in_a_tool_input_schema_answers_promptly(
    http: Any, owner: McpTestClient, caller: McpTestClient
) -> None:
    tool = await publish_tool(owner, inputSchema=REDOS_SCHEMA)
    probed = await while_probing(
        http, caller.call_tool("workflow_invoke", invoke_args(tool, REDOS_INPUT))
    )
    error = refused(probed.result, "WORKFLOW_INPUT_INVALID")["error"]
    assert error["retryable"] is False
    assert error["details"] == {"validation": {"path": "$.claimId", "rule": "pattern"}}
    assert_responsive(probed)


async def test_a_tool_input_pattern_re2_cannot_run_is_refused_at_binding_publish(
    http: Any, owner: McpTestClient
) -> None:
    wf_def_id = new_id()
    text = definition_yaml()
    await save_head(owner, wf_def_id, text)
    args = publish_definition_args(wf_def_id, text)
    args["expectedDefinitionDigest"] = definition_digest(text)
    ok(await owner.call_tool("workflow_definition_publish", args))
    schema = {"type": "object", "properties": {"claimId": {"pattern": "(a)\\1"}}}
    value = binding(wf_def_id, new_id(), text, inputSchema=schema)
    probed = await while_probing(
        http, owner.call_tool("workflow_binding_publish", publish_args(value, 0))
    )
    error = refused(probed.result, "WORKFLOW_INPUT_INVALID")["error"]
    assert "/properties/claimId/pattern" in error["message"]
    assert_responsive(probed)


async def test_a_definition_schema_pattern_re2_cannot_run_is_refused_at_publish(
    http: Any, owner: McpTestClient
) -> None:
    text = definition_yaml().replace(
        "      type: object\n",
        "      type: object\n      properties:\n        claimId:\n          pattern: '(?=a)'\n",
    )
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    args = publish_definition_args(wf_def_id, text)
    args["expectedDefinitionDigest"] = definition_digest(text)
    error = refused(
        await owner.call_tool("workflow_definition_publish", args), "WORKFLOW_INPUT_INVALID"
    )
    assert "/properties/claimId/pattern" in error["error"]["message"]


@pytest.mark.requirement("001:CEL Runtime Contract")
async def test_cel_size_amplification_stops_at_the_memory_ceiling_with_bounded_memory(
    http: Any, owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    tool = await publish_tool(owner, text=definition_yaml(extra_task=AMPLIFY_TASK))
    tracemalloc.start()
    try:
        probed = await while_probing(
            http, caller.call_tool("workflow_invoke", invoke_args(tool, AMPLIFY_INPUT))
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    body = refused(probed.result, "WORKFLOW_BUDGET_EXHAUSTED")
    assert body["status"] == "failed"
    assert body["error"]["retryable"] is False
    assert peak < AMPLIFY_PEAK_BOUND, f"peak {peak / 1e6:.0f} MB"
    assert_responsive(probed)


@pytest.mark.parametrize("tool_name", ["workflow_definition_save", "workflow_definition_publish"])
async def test_a_20000_task_definition_is_refused_before_parsing_naming_the_limit(
    http: Any, owner: McpTestClient, settings: Settings, tool_name: str
) -> None:
    text = many_tasks(20_000)
    wf_def_id = new_id()
    if tool_name == "workflow_definition_save":
        args: dict[str, Any] = {
            "hostId": HOST,
            "wfDefId": wf_def_id,
            "sourceRevision": 1,
            "actor": "steve",
            "namespace": "claims",
            "name": "big",
            "version": "1.2.0",
            "definition": text,
            "lifecycleStatus": "PUBLISHED",
            "catalogVisible": False,
            "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
            "active": True,
        }
    else:
        args = publish_definition_args(wf_def_id, text)
    default = refused(await owner.call_tool(tool_name, args), "WORKFLOW_INPUT_INVALID")["error"]
    assert "publication.limits.max_definition_bytes" in default["message"]
    # With room for the bytes, the task count is what refuses it, still before any parsing.
    settings.publication.limits = DefinitionLimits(max_definition_bytes=1_000_000)
    probed = await while_probing(http, owner.call_tool(tool_name, args))
    error = refused(probed.result, "WORKFLOW_INPUT_INVALID")["error"]
    assert "publication.limits.max_tasks (1000)" in error["message"]
    assert error["details"] == {"limit": "publication.limits.max_tasks"}
    assert_responsive(probed)
