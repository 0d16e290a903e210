"""The reference Gateway's routed tools/call: ACL, pins, input checks, workflow_invoke, results.

A real Workflow (the in-process app on the test database, an executor running) stands behind
the Gateway; Tools are published through the Gateway's relay by their owner.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from gateway.app import build_gateway, create_gateway_app
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from tests.support.binding_builders import OWNER, definition_yaml
from tests.support.gateway import (
    TOOL_NAME,
    RecordingTransport,
    entry,
    gateway_client,
    gateway_settings,
    write_tools,
)
from tests.support.invocation import (
    FAILING_TASK,
    Tool,
    client,
    invoke_args,
    ok,
    publish_tool,
    refused,
)
from tests.support.log_scan import LogScan
from tests.support.mcp import LEGACY, MODERN, McpTestClient
from tests.support.server import free_port

INSTANCE = "io.lightapi.workflow/workflowInstanceId"
DIGEST = "io.lightapi.workflow/definitionDigest"


def owner_of(http: httpx.AsyncClient, identity: DevIdentity) -> McpTestClient:
    """The definition owner, publishing through the Gateway (the relay) with the admin role."""
    return gateway_client(http, identity, roles=("admin",), user_id=OWNER)


@pytest.mark.requirement("000:Gateway Changes")
@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_a_routed_call_returns_the_output_with_the_instance_and_digest_in_meta(
    era: str,
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workflow_seen: RecordingTransport,
    log_scan: LogScan,
    workers: object,
) -> None:
    tool = await publish_tool(owner_of(gateway_http, dev_identity))
    write_tools(router_file, entry(tool))
    caller = gateway_client(gateway_http, dev_identity, era=era)
    # No log line of the session may hold the caller's input value (nor, as always, a token).
    log_scan.forbid("C-90417")
    reply = await caller.request(
        "tools/call", {"name": TOOL_NAME, "arguments": {"claimId": "C-90417"}}
    )
    result = reply.result
    assert result["isError"] is False, result
    assert result["structuredContent"] == {"marker": 1}
    assert result["content"] == [{"type": "text", "text": '{"marker":1}'}]
    assert result["_meta"][DIGEST] == tool.definition_digest
    assert isinstance(result["_meta"][INSTANCE], str)
    invoke = workflow_seen.requests[-1]
    assert workflow_seen.tool_names()[-1] == "workflow_invoke"
    assert invoke.headers["authorization"] == caller.auth["Authorization"]
    assert invoke.headers["x-scope-token"].startswith("Bearer ")
    # Seed 000 "Waiting, timeout and re-attach": the HTTP timeout is syncWaitMs + 2 s.
    assert invoke.extensions["timeout"]["read"] == 22.0


@pytest.mark.requirement("000:Gateway Changes")
async def test_a_tool_without_binding_digest_is_refused_and_the_others_keep_working(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workflow_seen: RecordingTransport,
    workers: object,
) -> None:
    tool = await publish_tool(owner_of(gateway_http, dev_identity))
    write_tools(router_file, entry(tool), entry(tool, "claims.legacy", binding_digest=None))
    caller = gateway_client(gateway_http, dev_identity)
    sent = len(workflow_seen.requests)
    body = refused(
        await caller.call_tool("claims.legacy", {"claimId": "C-1"}), "WORKFLOW_START_REJECTED"
    )
    assert "republish this Tool" in body["error"]["message"]
    assert len(workflow_seen.requests) == sent
    assert ok(await caller.call_tool(TOOL_NAME, {"claimId": "C-1"})) == {"marker": 1}


@pytest.mark.requirement("001:Gateway Execution Flow")
async def test_arguments_outside_the_published_schema_are_refused_before_workflow_sees_them(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    tool = await publish_tool(owner_of(gateway_http, dev_identity))
    write_tools(router_file, entry(tool))
    caller = gateway_client(gateway_http, dev_identity)
    sent = len(workflow_seen.requests)
    missing = refused(await caller.call_tool(TOOL_NAME, {}), "WORKFLOW_INPUT_INVALID")
    assert "claimId is required" in missing["error"]["message"]
    pattern = refused(
        await caller.call_tool(TOOL_NAME, {"claimId": "DROP TABLE"}), "WORKFLOW_INPUT_INVALID"
    )
    assert pattern["error"]["details"]["validation"] == {"path": "$.claimId", "rule": "pattern"}
    assert "DROP TABLE" not in str(pattern)
    assert len(workflow_seen.requests) == sent


@pytest.mark.requirement("000:Gateway Changes")
async def test_an_input_over_maximum_request_bytes_is_refused_at_the_gateway(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    tool = await publish_tool(owner_of(gateway_http, dev_identity))
    # {"claimId":"C-1001"} is 20 canonical bytes, the measure Workflow uses.
    write_tools(
        router_file,
        entry(tool, maximum_request_bytes=19),
        entry(tool, "claims.roomy", maximum_request_bytes=20),
    )
    caller = gateway_client(gateway_http, dev_identity)
    sent = len(workflow_seen.requests)
    body = refused(
        await caller.call_tool(TOOL_NAME, {"claimId": "C-1001"}), "WORKFLOW_INPUT_INVALID"
    )
    assert body["error"]["details"] == {"limit": "maximumRequestBytes", "maximum": 19, "size": 20}
    assert len(workflow_seen.requests) == sent
    await caller.call_tool("claims.roomy", {"claimId": "C-1001"})
    assert workflow_seen.tool_names()[-1] == "workflow_invoke"


@pytest.mark.requirement("000:Error envelopes")
async def test_workflows_error_results_pass_through_unchanged(
    gateway_http: httpx.AsyncClient,
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workers: object,
) -> None:
    owner = owner_of(gateway_http, dev_identity)
    failing = await publish_tool(owner, text=definition_yaml(extra_task=FAILING_TASK))
    stale = await publish_tool(owner)
    write_tools(
        router_file,
        entry(failing, "claims.failing"),
        entry(stale, "claims.stale", binding_digest="sha256:" + "0" * 64),
    )
    caller = gateway_client(gateway_http, dev_identity)
    direct = client(http, dev_identity, roles=("genai-admin",))
    through = await caller.call_tool("claims.failing", {"claimId": "C-1"})
    failed = refused(through, "WORKFLOW_TASK_FAILED")
    assert failed["status"] == "failed" and "boom" in failed["error"]["message"]
    assert through["content"][0]["text"].startswith("WORKFLOW_TASK_FAILED: ")
    assert through["_meta"][INSTANCE] == failed["workflowInstanceId"]
    mismatch = await caller.call_tool("claims.stale", {"claimId": "C-1"})
    args = invoke_args(stale, {"claimId": "C-1"}, expectedBindingDigest="sha256:" + "0" * 64)
    expected = await direct.call_tool("workflow_invoke", args)
    assert refused(mismatch, "WORKFLOW_DEFINITION_MISMATCH") == refused(
        expected, "WORKFLOW_DEFINITION_MISMATCH"
    )
    assert mismatch["content"] == expected["content"]


@pytest.mark.requirement("000:Gateway Changes")
async def test_a_direct_workflow_invoke_and_an_unknown_tool_are_refused(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    tool = await publish_tool(owner_of(gateway_http, dev_identity))
    write_tools(router_file, entry(tool))
    caller = gateway_client(gateway_http, dev_identity, roles=("admin", "workflow-admin"))
    sent = len(workflow_seen.requests)
    internal = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_POLICY_DENIED"
    )
    assert internal["error"]["message"] == "workflow_invoke is internal to the Gateway"
    unknown = refused(await caller.call_tool("claims.nothing", {}), "WORKFLOW_POLICY_DENIED")
    assert "unknown tool" in unknown["error"]["message"]
    assert len(workflow_seen.requests) == sent


@pytest.mark.requirement("000:Parent action")
async def test_a_call_from_a_running_workflow_is_refused_as_nested_never_run_as_a_root(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    # Issue 40 X-12: the Gateway ignored x-workflow-action and Workflow started a root run.
    tool = await publish_tool(owner_of(gateway_http, dev_identity))
    write_tools(router_file, entry(tool))
    caller = gateway_client(gateway_http, dev_identity)
    action = "0198a3c2-0000-7000-8000-00000000a001"
    nested = refused(
        await caller.call_tool(
            TOOL_NAME, {"claimId": "C-1"}, headers={"X-Workflow-Action": action}
        ),
        "WORKFLOW_POLICY_DENIED",
    )
    assert "nested workflow-backed Tool calls" in nested["error"]["message"]
    assert "workflowInstanceId" not in nested
    sent = msgspec.json.decode(workflow_seen.requests[-1].content)["params"]["arguments"]
    assert sent["parentActionId"] == action
    before = len(workflow_seen.requests)
    forged = refused(
        await caller.call_tool(TOOL_NAME, {"claimId": "C-1"}, headers={"X-Workflow-Action": "x"}),
        "WORKFLOW_POLICY_DENIED",
    )
    assert "never started as a root run" in forged["error"]["message"]
    assert len(workflow_seen.requests) == before


@pytest.mark.requirement("000:Error mapping")
async def test_workflow_down_is_invocation_unavailable_and_retryable(
    settings: Settings, dev_identity: DevIdentity, router_file: Path, tmp_path: Path
) -> None:
    tool_values: dict[str, Any] = {
        "tool_id": "0198a3c2-0000-7000-8000-000000000001",
        "wf_def_id": "0198a3c2-0000-7000-8000-000000000002",
        "binding_digest": "sha256:" + "b" * 64,
        "definition_digest": "sha256:" + "d" * 64,
    }
    tool = Tool(binding_id="", aggregate_version=1, text="", **tool_values)
    write_tools(router_file, entry(tool))
    nobody = f"http://127.0.0.1:{free_port()}/mcp"
    wired = build_gateway(
        gateway_settings(settings, router_file, workflow_url=nobody), identity=dev_identity
    )
    transport = httpx.ASGITransport(app=create_gateway_app(wired))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as http:
        caller = gateway_client(http, dev_identity, roles=("admin",))
        routed = refused(
            await caller.call_tool(TOOL_NAME, {"claimId": "C-1"}),
            "WORKFLOW_INVOCATION_UNAVAILABLE",
        )
        relayed = refused(
            await caller.call_tool("workflow_get_status", {"workflowInstanceId": "x"}),
            "WORKFLOW_INVOCATION_UNAVAILABLE",
        )
    await wired.client.aclose()
    assert routed["error"]["retryable"] is True and relayed["error"]["retryable"] is True


@pytest.mark.requirement("000:Waiting, timeout and re-attach")
async def test_a_workflow_that_never_answers_is_unavailable_after_sync_wait_plus_the_margin(
    settings: Settings, dev_identity: DevIdentity, router_file: Path
) -> None:
    released = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)  # the request arrives; no answer ever leaves
        await released.wait()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    tool = Tool(
        tool_id="0198a3c2-0000-7000-8000-000000000001",
        wf_def_id="0198a3c2-0000-7000-8000-000000000002",
        binding_id="",
        binding_digest="sha256:" + "b" * 64,
        definition_digest="sha256:" + "d" * 64,
        aggregate_version=1,
        text="",
    )
    write_tools(router_file, entry(tool, sync_wait_ms=1))
    wired = build_gateway(
        gateway_settings(settings, router_file, workflow_url=f"http://127.0.0.1:{port}/mcp"),
        identity=dev_identity,
    )
    transport = httpx.ASGITransport(app=create_gateway_app(wired))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as http:
            caller = gateway_client(http, dev_identity)
            body = refused(
                await caller.call_tool(TOOL_NAME, {"claimId": "C-1"}),
                "WORKFLOW_INVOCATION_UNAVAILABLE",
            )
    finally:
        await wired.client.aclose()
        released.set()
        server.close()
        await server.wait_closed()
    assert body["error"]["retryable"] is True
    assert "ReadTimeout" in body["error"]["message"]
