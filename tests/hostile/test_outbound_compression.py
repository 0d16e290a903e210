"""Compressed responses are decoded, within the response size bound (a bomb is a clear error)."""

from __future__ import annotations

import pytest

from runtime.addresses import LOOPBACK_NETWORKS
from runtime.collaborators import Services
from tests.support.invocation import invoke_args, ok, running_executor, until_settled
from tests.support.mcp import McpTestClient
from tests.support.outbound import (
    SUMMARY_JSON,
    OutboundBackend,
    allow_http,
    publish_http_tool,
    reason_definition,
)

pytestmark = pytest.mark.requirement("001:Underlying API And MCP Calls")


async def test_a_gzip_response_is_decoded(
    owner: McpTestClient, caller: McpTestClient, services: Services, backend: OutboundBackend
) -> None:
    allow_http(services, *LOOPBACK_NETWORKS)
    tool = await publish_http_tool(owner, f"{backend.base}/gzip")
    async with running_executor(services):
        result = await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
    assert ok(result)["output"] == SUMMARY_JSON


async def test_a_gzip_bomb_stops_at_the_response_bound_with_a_clear_error(
    owner: McpTestClient, caller: McpTestClient, services: Services, backend: OutboundBackend
) -> None:
    allow_http(services, *LOOPBACK_NETWORKS)
    endpoint = f"{backend.base}/bomb"
    tool = await publish_http_tool(owner, endpoint, reason_definition(endpoint))
    async with running_executor(services):
        result = await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
    # The workflow caught the call's communication error: its detail is the runtime's reason.
    reason = ok(result)["output"]["reason"]
    assert reason == "response larger than 1048576 bytes once decompressed"
    assert [request["path"] for request in backend.requests] == ["/bomb"]
