"""Tools the qualification tests publish on the live service (built from the shared builders)."""

from __future__ import annotations

import dataclasses
from typing import Any

from runtime.canonical import definition_digest
from tests.support.binding_builders import (
    HOST,
    binding,
    endpoint_target,
    new_id,
    publish_args,
    write_binding,
)
from tests.support.invocation import Tool, invoke_args, ok, publish_version, save_head
from tests.support.mcp import McpTestClient
from tests.support.protected_backend import calling_definition, http_task
from tests.support.scale_out import scalar

REPLAYING = {"kind": "derived", "resultReplayMs": 600000}


def get_definition(uri: str, *, authenticated: bool = False, then: str = "") -> str:
    """One GET of uri (with the run credential when authenticated), then the raw tasks then."""
    return calling_definition(
        http_task("fetch", "GET", uri, authenticated=authenticated, write=False) + then
    )


def post_definition(uri: str, *, then: str = "", before: str = "") -> str:
    """The raw tasks before, a POST of uri with approval evidence (a write), then the tasks then."""
    return calling_definition(
        before + http_task("save", "POST", uri, authenticated=True, write=True) + then
    )


async def publish_live_tool(
    owner: McpTestClient,
    text: str,
    targets: tuple[str, ...] = (),
    *,
    write: bool = False,
    dependencies: list[dict[str, Any]] | None = None,
    **changes: Any,
) -> Tool:
    """Save, publish and self-approve (as the owner) a Tool reaching targets; changes go to the
    binding (a write Tool gets the ten-minute replay window unless changes say otherwise)."""
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    await publish_version(owner, wf_def_id, text, "1.2.0")
    tool_id = new_id()
    value = (write_binding if write else binding)(wf_def_id, tool_id, text, **changes)
    reach = [endpoint_target(f"t{index}", uri) for index, uri in enumerate(targets)]
    args = publish_args(value, 0, endpoint_targets=reach, dependencies=dependencies)
    receipt = ok(await owner.call_tool("workflow_binding_publish", args))
    assert receipt["status"] == "active", receipt
    return Tool(
        tool_id=tool_id,
        wf_def_id=wf_def_id,
        binding_id=receipt["bindingId"],
        binding_digest=receipt["bindingDigest"],
        definition_digest=definition_digest(text),
        aggregate_version=receipt["aggregateVersion"],
        text=text,
    )


async def invoke(
    caller: McpTestClient, tool: Tool, data: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """workflow_invoke as the Gateway sends it; the CallToolResult."""
    return await caller.call_tool("workflow_invoke", invoke_args(tool, data, **extra))


async def revoke(owner: McpTestClient, tool: Tool, comment: str = "no longer approved") -> None:
    """The owner revokes the Tool's active revision."""
    args = {
        "hostId": HOST,
        "bindingId": tool.binding_id,
        "expectedBindingDigest": tool.binding_digest,
        "comment": comment,
        "operationId": new_id(),
    }
    ok(await owner.call_tool("workflow_binding_revoke", args))


def runs_of(tool: Tool) -> tuple[str, str]:
    """SQL and parameter counting the runs admitted for the Tool's revision."""
    return "SELECT count(*) FROM workflow_process WHERE binding_id = %s", tool.binding_id


async def republish(
    owner: McpTestClient, tool: Tool, targets: tuple[str, ...], **changes: Any
) -> dict[str, Any]:
    """The owner publishes a changed binding of the Tool's pinned version; the active receipt."""
    value = binding(tool.wf_def_id, tool.tool_id, tool.text, **changes)
    reach = [endpoint_target(f"t{index}", uri) for index, uri in enumerate(targets)]
    args = publish_args(value, tool.aggregate_version, endpoint_targets=reach)
    receipt = ok(await owner.call_tool("workflow_binding_publish", args))
    assert receipt["status"] == "active", receipt
    return receipt


async def republish_version(
    owner: McpTestClient, tool: Tool, text: str, version: str, **changes: Any
) -> Tool:
    """The owner publishes text as a new version and re-pins the Tool to it (no reach)."""
    await publish_version(owner, tool.wf_def_id, text, version)
    value = binding(tool.wf_def_id, tool.tool_id, text, version=version, **changes)
    args = publish_args(value, tool.aggregate_version)
    receipt = ok(await owner.call_tool("workflow_binding_publish", args))
    assert receipt["status"] == "active", receipt
    return dataclasses.replace(
        tool,
        binding_id=receipt["bindingId"],
        binding_digest=receipt["bindingDigest"],
        definition_digest=definition_digest(text),
        aggregate_version=receipt["aggregateVersion"],
        text=text,
    )


async def expire_windows(database_url: str, instance: str) -> None:
    """Move a run's idempotency windows into the past (what waiting the window out does)."""
    await scalar(
        database_url,
        "UPDATE workflow_idempotency_t SET in_flight_until = now() - interval '1 second',"
        " result_replay_until = now() - interval '1 second' WHERE process_id = %s RETURNING 1",
        instance,
    )


def mcp_calls_definition(tool: str, *, calls: int) -> str:
    """A definition calling the MCP tool `calls` times in a row (through the Gateway)."""
    call = f"      call: mcp\n      with:\n        tool: {tool}\n        arguments: {{}}\n"
    tasks = "".join(f"  - call{index}:\n" + call for index in range(calls))
    return (
        'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
        '  version: "1.2.0"\n'
        "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
        "do:\n" + tasks
    )


def limits(concurrent: int, per_user: int, per_minute: int, per_minute_user: int) -> dict[str, int]:
    """An admissionLimits object."""
    return {
        "maximumConcurrentRuns": concurrent,
        "maximumConcurrentRunsPerUser": per_user,
        "startsPerMinute": per_minute,
        "startsPerMinutePerUser": per_minute_user,
    }


async def run_ended(caller: McpTestClient, run: dict[str, str]) -> bool:
    """Whether workflow_get_status reports the run in a terminal state."""
    status = ok(await caller.call_tool("workflow_get_status", run))
    return status["state"] in ("COMPLETED", "FAILED", "CANCELLED")
