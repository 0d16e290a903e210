"""Qualification through the reference Gateway: real processes (the service, two Gateways).

Seed 000 "Qualification Checklist" items 07 (the Gateway half), 25 and 34, and the seed 001
Phase 1 exit gates that need a Gateway: a Gateway restart loses no accepted workflow, another
Gateway process resumes a wait, concurrent waiters observe one instance. Tools are published
through a Gateway's relay by their owner, then served from the shared mcp-router.yml.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.binding_builders import HOST, OWNER, definition_yaml
from tests.support.gateway import GatewayStack, LiveGateway, entry, run_gateway, write_tools
from tests.support.invocation import Tool, ok, publish_tool, refused, until_settled
from tests.support.mcp import MODERN, McpTestClient
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)

INSTANCE = "io.lightapi.workflow/workflowInstanceId"
REPLAY = {"kind": "derived", "resultReplayMs": 600000}
CALLER_POLICY = {"requireAnyOf": [{"claim": "role", "value": "claims-agent"}]}


def pause(seconds: int) -> str:
    """A definition whose run waits that long before it completes."""
    return definition_yaml(extra_task=f"  - pause:\n      wait: PT{seconds}S\n")


@dataclass(frozen=True)
class Published:
    """The module's Tools, served by both Gateways."""

    quick: Tool
    guarded: Tool
    slow: Tool
    brief_wait: Tool


def client_of(
    http: httpx.AsyncClient, stack: GatewayStack, *roles: str, user: str = "caller-1"
) -> McpTestClient:
    """An MCP client of a Gateway for one user of HOST (a user bearer only)."""
    token = stack.identity.user_token(host_id=HOST, user_id=user, roles=roles)
    return McpTestClient(http, MODERN, {"Authorization": f"Bearer {token}"})


def http_of(gateway: LiveGateway) -> httpx.AsyncClient:
    """An HTTP client of a Gateway process over TCP."""
    return httpx.AsyncClient(base_url=gateway.base_url, timeout=60.0)


@pytest.fixture(scope="module")
async def published(gateway_stack: GatewayStack) -> AsyncIterator[Published]:
    """Four Tools published through Gateway A, and a snapshot serving them plus item 07's."""
    async with http_of(gateway_stack.gateways[0]) as http:
        owner = client_of(http, gateway_stack, "admin", user=OWNER)
        tools = Published(
            quick=await publish_tool(owner),
            guarded=await publish_tool(owner, callerPolicy=CALLER_POLICY),
            slow=await publish_tool(owner, text=pause(6), idempotencyPolicy=REPLAY),
            brief_wait=await publish_tool(
                owner, text=pause(4), idempotencyPolicy=REPLAY, syncWaitMs=1000
            ),
        )
        write_tools(
            gateway_stack.router_file,
            entry(tools.quick, "claims.quick"),
            entry(tools.quick, "claims.stale", binding_digest="sha256:" + "0" * 64),
            entry(tools.quick, "claims.unpinned", binding_digest=None),
            entry(tools.guarded, "claims.guarded"),
            entry(tools.slow, "claims.slow"),
            entry(tools.brief_wait, "claims.brief", sync_wait_ms=1000),
        )
        for gateway in gateway_stack.gateways:
            await _serving(gateway, gateway_stack, "claims.brief")
        yield tools


async def _serving(gateway: LiveGateway, stack: GatewayStack, name: str) -> None:
    async with http_of(gateway) as http:
        caller = client_of(http, stack, "admin")

        async def listed() -> bool:
            tools = (await caller.request("tools/list")).result["tools"]
            return any(tool["name"] == name for tool in tools)

        await wait_until(listed, what=f"{name} served by {gateway.base_url}", within_s=20)


@pytest.mark.requirement("000:QC-07")
async def test_item_07a_a_snapshot_with_a_stale_binding_digest_gets_definition_mismatch(
    gateway_stack: GatewayStack, published: Published
) -> None:
    """A Gateway snapshot with a stale bindingDigest gets WORKFLOW_DEFINITION_MISMATCH."""
    async with http_of(gateway_stack.gateways[0]) as http:
        caller = client_of(http, gateway_stack, "genai-admin")
        result = await caller.call_tool("claims.stale", {"claimId": "C-701"})
    refused(result, "WORKFLOW_DEFINITION_MISMATCH")


@pytest.mark.requirement("000:QC-07")
async def test_item_07b_a_tool_without_binding_digest_is_start_rejected_for_that_tool_only(
    gateway_stack: GatewayStack, published: Published
) -> None:
    """One without bindingDigest gets WORKFLOW_START_REJECTED for that Tool only."""
    async with http_of(gateway_stack.gateways[1]) as http:
        caller = client_of(http, gateway_stack, "genai-admin")
        body = refused(
            await caller.call_tool("claims.unpinned", {"claimId": "C-702"}),
            "WORKFLOW_START_REJECTED",
        )
        assert "republish this Tool" in body["error"]["message"]
        assert ok(await caller.call_tool("claims.quick", {"claimId": "C-702"})) == {"marker": 1}
    assert len(await gateway_stack.runs_of(published.quick.binding_id)) >= 1


@pytest.mark.requirement("000:QC-25")
async def test_item_25_genai_admin_calls_a_tool_and_a_user_outside_its_caller_policy_cannot(
    gateway_stack: GatewayStack, published: Published
) -> None:
    """A user with genai-admin but not workflow-admin can call a workflow-backed Tool, and a
    user outside a revision's caller policy cannot."""
    async with http_of(gateway_stack.gateways[0]) as http:
        genai = client_of(http, gateway_stack, "genai-admin")
        assert ok(await genai.call_tool("claims.quick", {"claimId": "C-2501"})) == {"marker": 1}
        refused(
            await genai.call_tool("claims.guarded", {"claimId": "C-2502"}),
            "WORKFLOW_POLICY_DENIED",
        )
        agent = client_of(http, gateway_stack, "genai-admin", "claims-agent", user="agent-1")
        assert ok(await agent.call_tool("claims.guarded", {"claimId": "C-2502"})) == {"marker": 1}


@pytest.mark.requirement("000:QC-34")
async def test_item_34_a_client_tools_call_for_workflow_invoke_is_refused_by_the_gateway(
    gateway_stack: GatewayStack, published: Published
) -> None:
    """A client tools/call for workflow_invoke is refused by the Gateway."""
    arguments = {
        "stableToolRef": published.quick.tool_id,
        "expectedBindingDigest": published.quick.binding_digest,
        "expectedDefinitionDigest": published.quick.definition_digest,
        "input": {"claimId": "C-3401"},
    }
    before = len(await gateway_stack.runs_of(published.quick.binding_id))
    async with http_of(gateway_stack.gateways[0]) as http:
        admin = client_of(http, gateway_stack, "admin", "workflow-admin", "genai-admin")
        result = await admin.call_tool("workflow_invoke", arguments)
        body = refused(result, "WORKFLOW_POLICY_DENIED")
        listed = (await admin.request("tools/list")).result["tools"]
    assert body["error"]["message"] == "workflow_invoke is internal to the Gateway"
    assert "workflow_invoke" not in {tool["name"] for tool in listed}
    assert len(await gateway_stack.runs_of(published.quick.binding_id)) == before


@pytest.mark.requirement("001:Phase 1 exit gates")
async def test_gate_gateway_restart_loses_no_accepted_workflow(
    gateway_stack: GatewayStack, published: Published
) -> None:
    """Gateway restart does not lose an accepted workflow: kill -9 the Gateway while a call
    waits, restart it, and the retry re-attaches to the same instance, which completes."""
    directory = gateway_stack.directory / "restarted"
    arguments = {"claimId": "C-9001"}
    before = set(await gateway_stack.runs_of(published.slow.binding_id))
    with run_gateway(
        directory, gateway_stack.identity, gateway_stack.server.mcp_url,
        gateway_stack.router_file, host_id=HOST,
    ) as doomed:  # fmt: skip
        await _serving(doomed, gateway_stack, "claims.slow")
        async with http_of(doomed) as http:
            caller = client_of(http, gateway_stack, "genai-admin")
            waiting = asyncio.create_task(caller.call_tool("claims.slow", arguments))

            async def accepted() -> bool:
                return bool(set(await gateway_stack.runs_of(published.slow.binding_id)) - before)

            await wait_until(accepted, what="the run accepted", within_s=20)
            doomed.kill()
            with pytest.raises(httpx.TransportError):
                await waiting
        port = int(doomed.base_url.rsplit(":", 1)[1])
    [(instance, _state)] = set(await gateway_stack.runs_of(published.slow.binding_id)) - before
    with run_gateway(
        directory, gateway_stack.identity, gateway_stack.server.mcp_url,
        gateway_stack.router_file, host_id=HOST, port=port,
    ) as restarted:  # fmt: skip
        async with http_of(restarted) as http:
            caller = client_of(http, gateway_stack, "genai-admin")
            result = await until_settled(lambda: caller.call_tool("claims.slow", arguments))
    assert result["isError"] is False, result
    assert result["_meta"][INSTANCE] == instance
    runs = set(await gateway_stack.runs_of(published.slow.binding_id)) - before
    assert runs == {(instance, "COMPLETED")}


@pytest.mark.requirement("001:Phase 1 exit gates")
async def test_gate_another_gateway_process_resumes_a_wait(
    gateway_stack: GatewayStack, published: Published
) -> None:
    """Any gateway node can resume a wait: a call that timed out on Gateway A is resumed on
    Gateway B, which re-attaches to the same instance and gets its result."""
    arguments = {"claimId": "C-9101"}
    first, second = gateway_stack.gateways
    async with http_of(first) as http:
        caller = client_of(http, gateway_stack, "genai-admin")
        timed_out = refused(await caller.call_tool("claims.brief", arguments), "WORKFLOW_TIMEOUT")
    assert timed_out["error"]["retryable"] is True
    instance = timed_out["workflowInstanceId"]
    async with http_of(second) as http:
        caller = client_of(http, gateway_stack, "genai-admin")
        result = await until_settled(lambda: caller.call_tool("claims.brief", arguments))
    assert result["isError"] is False, result
    assert result["_meta"][INSTANCE] == instance
    assert [run for run, _ in await gateway_stack.runs_of(published.brief_wait.binding_id)] == [
        instance
    ]


@pytest.mark.requirement("001:Phase 1 exit gates")
async def test_gate_concurrent_waiters_observe_one_instance(
    gateway_stack: GatewayStack, published: Published
) -> None:
    """Concurrent waiters observe one durable instance: identical calls through two Gateways
    at once all answer with the same workflowInstanceId, and one run exists."""
    arguments = {"claimId": "C-9201"}
    before = {run for run, _ in await gateway_stack.runs_of(published.slow.binding_id)}
    clients = [http_of(gateway) for gateway in gateway_stack.gateways]
    try:
        callers = [client_of(http, gateway_stack, "genai-admin") for http in clients]
        results = await asyncio.gather(
            *(_settled(callers[index % 2], arguments) for index in range(8))
        )
    finally:
        for http in clients:
            await http.aclose()
    instances = {result["_meta"][INSTANCE] for result in results}
    assert len(instances) == 1, results
    runs = {run for run, _ in await gateway_stack.runs_of(published.slow.binding_id)}
    assert runs - before == instances


async def _settled(caller: McpTestClient, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call until the answer is final: a capacity refusal's loser retries after retryAfterMs
    (seed 000: two identical calls that arrive together may both miss the attach)."""
    async with asyncio.timeout(60):
        while True:
            result = await until_settled(lambda: caller.call_tool("claims.slow", arguments))
            error = result["structuredContent"].get("error") if result["isError"] else None
            if error is None or error["code"] != "WORKFLOW_CAPACITY_EXHAUSTED":
                assert result["isError"] is False, result
                return result
            await asyncio.sleep(error.get("retryAfterMs", 100) / 1000)
