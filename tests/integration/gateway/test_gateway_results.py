"""What the Gateway makes of workflow_invoke's answer: output checked against the Tool's
outputSchema, the digest Workflow ran, the text per resultTextMode, one trace end to end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import msgspec
import pytest

from gateway.app import build_gateway, create_gateway_app
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from tests.integration.gateway.test_gateway_access import listed
from tests.support.binding_builders import OWNER, definition_yaml
from tests.support.gateway import (
    TOOL_NAME,
    RecordingTransport,
    entry,
    gateway_client,
    gateway_settings,
    write_tools,
)
from tests.support.invocation import FAILING_TASK, ok, publish_tool, refused
from tests.support.mcp import MODERN

MARKER_SCHEMA = {
    "type": "object",
    "properties": {"marker": {"type": "integer"}},
    "required": ["marker"],
}
SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string", "pattern": "^Claim"}},
    "required": ["summary"],
}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def owner_of(http: httpx.AsyncClient, identity: DevIdentity) -> Any:
    """The definition owner, publishing through the Gateway's relay."""
    return gateway_client(http, identity, roles=("admin",), user_id=OWNER)


@pytest.mark.requirement("001:MCP Result Envelope")
async def test_output_outside_the_output_schema_fails_closed_and_inside_it_passes(
    gateway_http: httpx.AsyncClient, dev_identity: DevIdentity, router_file: Path, workers: object
) -> None:
    tool = await publish_tool(owner_of(gateway_http, dev_identity))
    write_tools(
        router_file,
        entry(tool, "claims.marker", output_schema=MARKER_SCHEMA),
        entry(
            tool, "claims.read", output_schema=SUMMARY_SCHEMA, annotations={"readOnlyHint": True}
        ),
        entry(tool, "claims.write", output_schema=SUMMARY_SCHEMA),
    )
    caller = gateway_client(gateway_http, dev_identity)
    assert ok(await caller.call_tool("claims.marker", {"claimId": "C-1"})) == {"marker": 1}
    read = refused(
        await caller.call_tool("claims.read", {"claimId": "C-2"}), "WORKFLOW_OUTPUT_INVALID"
    )
    assert read["status"] == "failed" and read["error"]["afterEffect"] is False
    assert "$.summary" in read["error"]["message"] or "required" in read["error"]["message"]
    assert isinstance(read["workflowInstanceId"], str)
    write = refused(
        await caller.call_tool("claims.write", {"claimId": "C-3"}),
        "WORKFLOW_OUTPUT_INVALID_AFTER_EFFECT",
    )
    assert write["error"]["afterEffect"] is True


@pytest.mark.requirement("000:Error envelopes")
async def test_a_refusal_conforms_to_the_output_schema_the_tool_declares(
    gateway_http: httpx.AsyncClient, dev_identity: DevIdentity, router_file: Path, workers: object
) -> None:
    tool = await publish_tool(owner_of(gateway_http, dev_identity))
    write_tools(router_file, entry(tool, "claims.read", output_schema=SUMMARY_SCHEMA))
    caller = gateway_client(gateway_http, dev_identity)
    declared = (await listed(caller))["claims.read"]["outputSchema"]
    result = await caller.call_tool("claims.read", {"claimId": "C-2"})
    assert result["isError"] is True
    jsonschema.Draft202012Validator(declared).validate(result["structuredContent"])
    jsonschema.Draft202012Validator(declared).validate({"summary": "Claim C-2"})


@pytest.mark.requirement("001:MCP Result Envelope")
async def test_summary_mode_shows_the_outputs_summary_and_compact_json_the_whole_output(
    gateway_http: httpx.AsyncClient, dev_identity: DevIdentity, router_file: Path, workers: object
) -> None:
    owner = owner_of(gateway_http, dev_identity)
    summarized = await publish_tool(
        owner,
        text=definition_yaml(
            extra_task="  - sum:\n      set:\n        summary: Claim C-9 is open\n"
        ),
    )
    plain = await publish_tool(owner)
    write_tools(
        router_file,
        entry(summarized, "claims.summary", result_text_mode="summary"),
        entry(plain, "claims.nosummary", result_text_mode="summary"),
        entry(plain, TOOL_NAME),
    )
    caller = gateway_client(gateway_http, dev_identity)
    result = await caller.call_tool("claims.summary", {"claimId": "C-9"})
    assert result["structuredContent"]["summary"] == "Claim C-9 is open"
    assert result["content"] == [{"type": "text", "text": "Claim C-9 is open"}]
    fallback = await caller.call_tool("claims.nosummary", {"claimId": "C-9"})
    instance = fallback["_meta"]["io.lightapi.workflow/workflowInstanceId"]
    assert (
        fallback["content"][0]["text"]
        == f"claims.nosummary completed (workflow instance {instance})"
    )
    compact = await caller.call_tool(TOOL_NAME, {"claimId": "C-9"})
    assert compact["content"][0]["text"] == '{"marker":1}'


@pytest.mark.requirement("001:Observability And Audit")
async def test_the_callers_trace_reaches_workflow_and_names_workflows_error(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workflow_seen: RecordingTransport,
    workers: object,
) -> None:
    tool = await publish_tool(
        owner_of(gateway_http, dev_identity), text=definition_yaml(extra_task=FAILING_TASK)
    )
    write_tools(router_file, entry(tool))
    caller = gateway_client(gateway_http, dev_identity)
    traceparent = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
    result = await caller.call_tool(
        TOOL_NAME, {"claimId": "C-1"}, headers={"traceparent": traceparent}
    )
    body = result["structuredContent"]
    assert body["error"]["code"] == "WORKFLOW_TASK_FAILED"
    # One correlation id: the caller's trace id is the one Workflow's error names.
    assert body["error"]["details"]["correlationId"] == TRACE_ID
    sent = workflow_seen.requests[-1].headers["traceparent"]
    assert sent.split("-")[1] == TRACE_ID and sent != traceparent


@dataclass
class DigestRewriter(httpx.AsyncBaseTransport):
    """A faulty Workflow: its real completed answers name another definition digest."""

    inner: httpx.AsyncBaseTransport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Forward, then rewrite structuredContent.definitionDigest of a completed call."""
        response = await self.inner.handle_async_request(request)
        body = msgspec.json.decode(await response.aread())
        structured = body.get("result", {}).get("structuredContent", {})
        if structured.get("status") == "completed":
            structured["definitionDigest"] = "sha256:" + "f" * 64
        return httpx.Response(
            response.status_code, json=body, headers={"content-type": "application/json"}
        )


@pytest.mark.requirement("001:Gateway Execution Flow")
async def test_workflow_reporting_another_definition_digest_fails_closed(
    app: Any,
    settings: Settings,
    dev_identity: DevIdentity,
    router_file: Path,
    gateway_http: httpx.AsyncClient,
    workers: object,
) -> None:
    tool = await publish_tool(owner_of(gateway_http, dev_identity))
    write_tools(router_file, entry(tool))
    faulty = DigestRewriter(httpx.ASGITransport(app=app))
    wired = build_gateway(
        gateway_settings(settings, router_file), identity=dev_identity, transport=faulty
    )
    transport = httpx.ASGITransport(app=create_gateway_app(wired))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as http:
        caller = gateway_client(http, dev_identity, era=MODERN)
        result = await caller.call_tool(TOOL_NAME, {"claimId": "C-1"})
    await wired.client.aclose()
    body = refused(result, "WORKFLOW_DEFINITION_MISMATCH")
    assert body["status"] == "failed" and "republish this Tool" in body["error"]["message"]
    assert "structuredContent" in result and "marker" not in str(result["structuredContent"])
