"""SSRF: internal address space is refused at publication and again at every connection.

Each case goes through POST /mcp on the running app. Internal space is refused in every
spelling and for every address a name resolves to; a name rebound to internal space after
publication is refused when the run connects, and the connection goes to the checked address.
"""

from __future__ import annotations

import pytest

from runtime.addresses import LOOPBACK_NETWORKS
from runtime.collaborators import Services
from tests.support.binding_builders import definition_yaml
from tests.support.invocation import invoke_args, ok, refused, running_executor, until_settled
from tests.support.mcp import McpTestClient
from tests.support.outbound import (
    DrivenResolver,
    OutboundBackend,
    allow_http,
    publish_http_tool,
    publish_target_binding,
)

INTERNAL_SPELLINGS = [
    "169.254.169.254",
    "10.0.0.1",
    "[::1]",
    "0x7f000001",
    "2130706433",
    "[::ffff:169.254.169.254]",
    "127.1",
    "0177.0.0.1",
    "100.64.0.1",
    "[fd00::1]",
    "0.0.0.0",
    "localhost",
]
REBOUND = "claims.rebind.test"


@pytest.mark.requirement("000:Binding publish")
@pytest.mark.parametrize("host", INTERNAL_SPELLINGS)
async def test_publish_refuses_a_target_in_internal_space_in_any_spelling(
    host: str, owner: McpTestClient, services: Services
) -> None:
    allow_http(services)  # the default: no internal network allowed
    published = await publish_target_binding(owner, definition_yaml(), [f"https://{host}/claims"])
    error = refused(published.result, "WORKFLOW_POLICY_DENIED")["error"]
    assert "internal address space" in error["message"]
    assert "allowed_networks" in error["message"]


@pytest.mark.requirement("000:Binding publish")
async def test_publish_refuses_a_name_that_resolves_to_the_metadata_address(
    owner: McpTestClient, services: Services
) -> None:
    resolver = DrivenResolver()
    resolver.answer("metadata.google.internal", ["169.254.169.254"])
    resolver.answer("dual.example.com", ["93.184.216.34", "fd00::5"])
    services.resolver = resolver
    allow_http(services)
    for uri in ("http://metadata.google.internal/computeMetadata/v1/", "https://dual.example.com/"):
        published = await publish_target_binding(owner, definition_yaml(), [uri])
        error = refused(published.result, "WORKFLOW_POLICY_DENIED")["error"]
        assert "resolves to internal address space" in error["message"]
    assert resolver.lookups == ["metadata.google.internal", "dual.example.com"]


@pytest.mark.requirement("000:Binding publish")
async def test_an_operator_allows_one_internal_network_and_no_other(
    owner: McpTestClient, services: Services
) -> None:
    allow_http(services, "10.20.0.0/16")
    allowed = await publish_target_binding(owner, definition_yaml(), ["https://10.20.1.2/claims"])
    assert ok(allowed.result)["status"] == "active"
    other = await publish_target_binding(owner, definition_yaml(), ["https://10.21.1.2/claims"])
    refused(other.result, "WORKFLOW_POLICY_DENIED")


@pytest.mark.requirement("001:Underlying API And MCP Calls")
async def test_without_the_allowance_a_loopback_backend_is_refused_at_connect(
    owner: McpTestClient, caller: McpTestClient, services: Services, backend: OutboundBackend
) -> None:
    allow_http(services, *LOOPBACK_NETWORKS)
    tool = await publish_http_tool(owner, f"{backend.base}/claims/{{claimId}}/summary")
    allow_http(services)  # the operator withdraws the allowance; the executor starts without it
    async with running_executor(services):
        result = await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
    error = refused(result, "WORKFLOW_POLICY_DENIED")["error"]
    assert "internal address space (loopback)" in error["message"]
    assert backend.requests == []


@pytest.mark.requirement("001:Underlying API And MCP Calls")
async def test_a_name_rebound_to_loopback_after_publication_is_refused_at_connect(
    owner: McpTestClient, caller: McpTestClient, services: Services, backend: OutboundBackend
) -> None:
    resolver = DrivenResolver()
    # Public when the binding is published, loopback when the run connects (DNS rebinding).
    resolver.answer(REBOUND, ["93.184.216.34"], ["127.0.0.1"])
    services.resolver = resolver
    allow_http(services)
    endpoint = f"http://{REBOUND}:{backend.port}/claims/{{claimId}}/summary"
    tool = await publish_http_tool(owner, endpoint)
    async with running_executor(services):
        result = await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
    error = refused(result, "WORKFLOW_POLICY_DENIED")["error"]
    assert "resolves to internal address space (loopback)" in error["message"]
    assert backend.requests == []


@pytest.mark.requirement("001:Underlying API And MCP Calls")
async def test_the_connection_goes_to_the_address_that_was_checked(
    owner: McpTestClient, caller: McpTestClient, services: Services, backend: OutboundBackend
) -> None:
    resolver = DrivenResolver()
    # The first answer is checked and used; a second lookup would get an internal address.
    resolver.answer(REBOUND, ["127.0.0.1"], ["10.9.9.9"])
    services.resolver = resolver
    allow_http(services, *LOOPBACK_NETWORKS)
    endpoint = f"http://{REBOUND}:{backend.port}/claims/{{claimId}}/summary"
    tool = await publish_http_tool(owner, endpoint)
    resolver.answer(REBOUND, ["127.0.0.1"], ["10.9.9.9"])
    resolver.lookups.clear()
    async with running_executor(services):
        result = await until_settled(
            lambda: caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-7"}))
        )
    assert ok(result)["output"] == {"path": "/claims/C-7/summary"}
    # One lookup, one connection to its checked address; the name itself is not in any DNS
    # (.test), so a second resolution by the HTTP library could not have connected at all.
    assert resolver.lookups == [REBOUND]
    assert [request["path"] for request in backend.requests] == ["/claims/C-7/summary"]
    assert backend.requests[0]["headers"]["host"] == f"{REBOUND}:{backend.port}"
