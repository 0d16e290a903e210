"""A URI-template value cannot leave the approved path (`..` never reaches the path above)."""

from __future__ import annotations

import pytest

from runtime.addresses import LOOPBACK_NETWORKS
from runtime.collaborators import Services
from tests.support.invocation import invoke_args, ok, refused, running_executor, until_settled
from tests.support.mcp import McpTestClient
from tests.support.outbound import OutboundBackend, allow_http, publish_http_tool

pytestmark = pytest.mark.requirement("001:Underlying API And MCP Calls")


@pytest.mark.parametrize("value", ["..", ".", "%2e%2e"])
async def test_a_dot_segment_value_never_reaches_the_path_above_the_target(
    value: str,
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    backend: OutboundBackend,
) -> None:
    allow_http(services, *LOOPBACK_NETWORKS)
    tool = await publish_http_tool(owner, f"{backend.base}/claims/{{claimId}}/summary")
    async with running_executor(services):
        fine = await until_settled(
            lambda: caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-1"}))
        )
        escaping = await until_settled(
            lambda: caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": value}))
        )
    assert ok(fine)["output"] == {"path": "/claims/C-1/summary"}
    error = refused(escaping, "WORKFLOW_POLICY_DENIED")["error"]
    assert ". or .. segments" in error["message"]
    assert [request["path"] for request in backend.requests] == ["/claims/C-1/summary"]
