"""Invocation and lifecycle tools answer authentication failure with JSON-RPC 401."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from generated.routes import ROUTES
from runtime.collaborators import Services
from runtime.mcp.app import attach_services, create_app
from runtime.mcp.call import ToolHandler
from runtime.security.devtools import DevIdentity
from tests.support import echo_handler, failing_handler
from tests.support.mcp import LEGACY, MODERN, McpTestClient, asgi_client, assert_valid_mcp
from tests.support.tokens import auth_headers as token_headers

pytestmark = pytest.mark.requirement("000:Error envelopes")


INVOCATION_TOOLS = (
    "workflow_invoke",
    "workflow_start",
    "workflow_wait_result",
    "workflow_get_status",
    "workflow_get_result",
    "workflow_cancel",
)


class EchoInput(msgspec.Struct):
    """Any object."""


def _echo_route(name: str) -> Any:
    """The generated route of name with its handler replaced by the echo handler."""
    template = ROUTES[name]

    def accept(value: Any) -> Any:
        return value

    return dataclasses.replace(
        template,
        input_model=EchoInput,
        validate_input=accept,
        validate_output=accept,
    )


@pytest.fixture
async def echo_client(
    services: Services, request: pytest.FixtureRequest, auth_headers: dict[str, str]
) -> AsyncIterator[McpTestClient]:
    routes = {name: _echo_route(name) for name in INVOCATION_TOOLS}
    handlers = dict.fromkeys(INVOCATION_TOOLS, ToolHandler(echo_handler.handle))

    app = create_app()
    attach_services(app, services, handlers, routes)
    async with asgi_client(app) as http:
        yield McpTestClient(http, request.param, auth_headers)


@pytest.mark.parametrize("echo_client", [MODERN, LEGACY], indirect=True)
@pytest.mark.parametrize("tool", INVOCATION_TOOLS)
async def test_an_expired_user_token_is_a_json_rpc_401(
    echo_client: McpTestClient, dev_identity: DevIdentity, tool: str
) -> None:
    headers = token_headers(dev_identity, dev_identity.user_token(expired=True), None)
    reply = await echo_client.request(
        "tools/call", {"name": tool, "arguments": {}}, headers=headers
    )
    assert reply.status == 401
    assert reply.error["code"] == -32001
    assert "www-authenticate" in reply.headers
    assert_valid_mcp(echo_client.era, "JSONRPCErrorResponse", reply.body)


@pytest.mark.parametrize("echo_client", [MODERN], indirect=True)
async def test_a_missing_scope_token_is_a_json_rpc_401(
    echo_client: McpTestClient, dev_identity: DevIdentity
) -> None:
    headers = {"Authorization": f"Bearer {dev_identity.user_token()}", "X-Scope-Token": ""}
    reply = await echo_client.request(
        "tools/call", {"name": "workflow_invoke", "arguments": {}}, headers=headers
    )
    assert reply.status == 401


@pytest.mark.parametrize("echo_client", [MODERN], indirect=True)
async def test_a_caller_service_not_allowed_is_a_policy_refusal_not_a_401(
    echo_client: McpTestClient, dev_identity: DevIdentity
) -> None:
    headers = token_headers(dev_identity, None, dev_identity.app_token(service_id="intruder"))
    reply = await echo_client.request(
        "tools/call", {"name": "workflow_invoke", "arguments": {}}, headers=headers
    )
    assert reply.status == 200
    assert reply.result["isError"] is True
    assert reply.result["structuredContent"]["error"]["code"] == "WORKFLOW_POLICY_DENIED"


@pytest.mark.parametrize("echo_client", [MODERN, LEGACY], indirect=True)
async def test_valid_tokens_reach_the_handler_with_the_verified_host(
    echo_client: McpTestClient,
) -> None:
    result = await echo_client.call_tool("workflow_invoke", {})
    assert result["isError"] is False
    assert result["structuredContent"]["hostId"] == "7d1a6c2e-3b4f-4e8a-9c1d-2f5e6a7b8c9d"


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_a_defect_in_a_handler_is_a_retryable_is_error_result_without_internals(
    services: Services, auth_headers: dict[str, str], era: str
) -> None:
    route = _echo_route("workflow_get_status")
    handlers = {"workflow_get_status": ToolHandler(failing_handler.handle)}
    app = create_app()
    attach_services(app, services, handlers, {"workflow_get_status": route})
    async with asgi_client(app) as http:
        client = McpTestClient(http, era, auth_headers)
        reply = await client.request("tools/call", {"name": "workflow_get_status", "arguments": {}})
    assert reply.status == 200
    result = reply.result
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["code"] == "WORKFLOW_INVOCATION_UNAVAILABLE"
    assert error["retryable"] is True
    assert "incident" in error["message"]
    assert "SELECT" not in str(result) and "hidden_table" not in str(result)
