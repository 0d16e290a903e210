"""The reference Gateway's entry: caller bearers, tools/list by role, the relayed tools' ACL."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from generated.routes import ROUTES
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, OWNER
from tests.support.gateway import TOOL_NAME, RecordingTransport, entry, gateway_client, write_tools
from tests.support.invocation import client, ok, publish_tool, refused
from tests.support.mcp import LEGACY, MODERN, McpTestClient

# Seed 000 "Operator setup": the relayed Workflow tools each role may see.
WORKFLOW_ADMIN_TOOLS = {
    "workflow_definition_save",
    "workflow_definition_publish",
    "workflow_definition_retire",
    "workflow_definition_grants_sync",
    "workflow_binding_get",
    "workflow_binding_list",
    "workflow_binding_decide",
    "workflow_binding_revoke",
    "workflow_binding_rollback",
    "workflow_start",
    "workflow_wait_result",
    "workflow_get_status",
    "workflow_get_result",
    "workflow_cancel",
    "workflow_feature_create",
    "workflow_feature_get",
    "workflow_feature_stage_start",
    "workflow_feature_stage_accept",
    "workflow_feature_decide",
    "workflow_feature_cancel",
    "workflow_definition_draft",
}
GENAI_ADMIN_TOOLS = {
    "workflow_definition_publish",
    "workflow_definition_retire",
    "workflow_binding_publish",
    "workflow_binding_retire",
    "workflow_binding_get",
    "workflow_binding_list",
    "workflow_binding_decide",
    "workflow_binding_revoke",
    "workflow_binding_rollback",
    "workflow_definition_draft",
}


async def listed(caller: McpTestClient) -> dict[str, dict[str, object]]:
    """Every Tool the caller sees, by name (all pages)."""
    tools: dict[str, dict[str, object]] = {}
    cursor = None
    while True:
        reply = await caller.request("tools/list", {} if cursor is None else {"cursor": cursor})
        result = reply.result
        tools.update({tool["name"]: tool for tool in result["tools"]})
        cursor = result.get("nextCursor")
        if cursor is None:
            return tools


async def published_snapshot(http: httpx.AsyncClient, identity: DevIdentity, path: Path) -> None:
    """One default-ACL Tool and one only claims-agent may use."""
    owner = gateway_client(http, identity, roles=("admin",), user_id=OWNER)
    tool = await publish_tool(owner)
    write_tools(path, entry(tool), entry(tool, "claims.agents", roles=("claims-agent",)))


@pytest.mark.requirement("000:Operator setup")
@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_tools_list_shows_each_role_its_tools_and_never_workflow_invoke(
    era: str, gateway_http: httpx.AsyncClient, dev_identity: DevIdentity, router_file: Path
) -> None:
    await published_snapshot(gateway_http, dev_identity, router_file)

    def caller(*roles: str) -> McpTestClient:
        return gateway_client(gateway_http, dev_identity, roles=roles, era=era)

    # The task inbox has no role check: every caller's assignments decide what it shows.
    inbox = {"workflow_task_list", "workflow_task_get", "workflow_task_complete"}
    assert set(await listed(caller("genai-admin"))) == {TOOL_NAME, *GENAI_ADMIN_TOOLS} | inbox
    assert set(await listed(caller("workflow-admin"))) == WORKFLOW_ADMIN_TOOLS | inbox
    assert set(await listed(caller("claims-agent"))) == {"claims.agents"} | inbox
    assert set(await listed(caller("nobody"))) == inbox
    everything = await listed(caller("admin", "claims-agent"))
    assert "workflow_invoke" not in everything
    # admin also delivers Lightspeed emissions (issue 37; also role lightspeed-session).
    assert set(everything) == {TOOL_NAME, "claims.agents"} | WORKFLOW_ADMIN_TOOLS | (
        GENAI_ADMIN_TOOLS | inbox | {"workflow_emission_deliver"}
    )


@pytest.mark.requirement("000:Operator setup")
async def test_relayed_tools_are_listed_exactly_as_workflow_lists_them(
    gateway_http: httpx.AsyncClient, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    through = await listed(gateway_client(gateway_http, dev_identity, roles=("admin",)))
    direct = await listed(client(http, dev_identity, roles=("admin",)))
    # workflow_invoke and the host secret tools are off the Gateway (gatewayPublication false).
    kept_off = {name for name, route in ROUTES.items() if not route.gateway_publication}
    assert {"workflow_invoke", "workflow_secret_put"} <= kept_off
    assert set(through) == set(direct) - kept_off
    for name, tool in through.items():
        assert tool == direct[name], name


@pytest.mark.requirement("000:Authorization")
async def test_the_tool_acl_refuses_a_caller_without_its_role_before_workflow(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    await published_snapshot(gateway_http, dev_identity, router_file)
    outsider = gateway_client(gateway_http, dev_identity, roles=("workflow-admin",))
    sent = len(workflow_seen.requests)
    refused(await outsider.call_tool(TOOL_NAME, {"claimId": "C-1"}), "WORKFLOW_POLICY_DENIED")
    refused(
        await outsider.call_tool("workflow_binding_publish", {"hostId": HOST}),
        "WORKFLOW_POLICY_DENIED",
    )
    genai = gateway_client(gateway_http, dev_identity, roles=("genai-admin",))
    body = refused(
        await genai.call_tool("workflow_definition_save", {"hostId": HOST}),
        "WORKFLOW_POLICY_DENIED",
    )
    assert "admin, host-admin, workflow-admin" in body["error"]["message"]
    assert len(workflow_seen.requests) == sent


@pytest.mark.requirement("000:Gateway assertion")
async def test_relayed_calls_carry_the_user_bearer_and_the_gateways_own(
    gateway_http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    router_file: Path,
    workflow_seen: RecordingTransport,
) -> None:
    await published_snapshot(gateway_http, dev_identity, router_file)
    reviewer = gateway_client(gateway_http, dev_identity, roles=("genai-admin",))
    args = {"hostId": HOST, "role": "requester"}
    listing = ok(await reviewer.call_tool("workflow_binding_list", args))
    assert listing["items"] == []
    request = workflow_seen.requests[-1]
    assert request.headers["authorization"] == reviewer.auth["Authorization"]
    scope = request.headers["x-scope-token"].removeprefix("Bearer ")
    assert scope != reviewer.auth["Authorization"].removeprefix("Bearer ")
    assert "traceparent" in request.headers


@pytest.mark.requirement("000:Operator setup")
@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
async def test_a_missing_user_bearer_or_an_app_bearer_in_its_place_is_a_json_rpc_401(
    method: str, gateway_http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    params = {"name": "workflow_get_status", "arguments": {}} if method == "tools/call" else {}
    anonymous = McpTestClient(gateway_http, MODERN, {})
    reply = await anonymous.request(method, params)
    assert reply.status == 401 and reply.error["code"] == -32001
    assert reply.headers["www-authenticate"].startswith("Bearer")
    # An application token, even one carrying user-like claims, is not a user bearer.
    app = dev_identity.app_token(host_id=HOST, extra_claims={"roles": ["admin"], "uid": "someone"})
    impostor = McpTestClient(gateway_http, MODERN, {"Authorization": f"Bearer {app}"})
    reply = await impostor.request(method, params)
    assert reply.status == 401, reply.body
    assert "application token" in reply.error["message"]


@pytest.mark.requirement("000:Operator setup")
@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
async def test_a_callers_scope_token_is_optional_but_must_verify_as_an_app_bearer(
    method: str, gateway_http: httpx.AsyncClient, dev_identity: DevIdentity, router_file: Path
) -> None:
    await published_snapshot(gateway_http, dev_identity, router_file)
    params = {"name": "workflow_invoke", "arguments": {}} if method == "tools/call" else {}
    user = dev_identity.user_token(host_id=HOST, roles=("admin",))
    for scope in (user, "not-a-token", dev_identity.app_token(host_id=HOST, expired=True)):
        bad = gateway_client(gateway_http, dev_identity, roles=("admin",), scope_token=scope)
        reply = await bad.request(method, params)
        assert reply.status == 401, reply.body
    good = gateway_client(
        gateway_http, dev_identity, roles=("admin",), scope_token=dev_identity.app_token()
    )
    reply = await good.request(method, params)
    assert reply.status == 200, reply.body
