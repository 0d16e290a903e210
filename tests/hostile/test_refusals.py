"""Hostile requests get exact refusals: the right status, a typed error, nothing retryable."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST
from tests.support.hostile import assert_responsive, while_probing
from tests.support.invocation import client, refused
from tests.support.mcp import MODERN, McpReply, McpTestClient
from tests.support.tokens import auth_headers

YEAR_10000 = 253_402_300_800


def call_body(modern: McpTestClient, name: str, arguments: dict[str, Any]) -> str:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": modern.params_with_meta({"name": name, "arguments": arguments}),
    }
    return json.dumps(message)


async def raw_post(
    http: httpx.AsyncClient, body: str, headers: list[tuple[str, str]]
) -> httpx.Response:
    return await http.post("/mcp", content=body, headers=headers)


def status_args() -> dict[str, Any]:
    return {"workflowInstanceId": "00000000-0000-4000-8000-000000000000"}


async def test_a_user_token_expiring_in_the_year_10000_is_a_401_not_a_500(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    for claim in ("exp", "iat"):
        user = dev_identity.user_token(host_id=HOST, extra_claims={claim: YEAR_10000})
        hostile = McpTestClient(
            http, MODERN, auth_headers(dev_identity, user, dev_identity.app_token(host_id=HOST))
        )
        probed = await while_probing(
            http,
            hostile.request(
                "tools/call", {"name": "workflow_get_status", "arguments": status_args()}
            ),
        )
        reply: McpReply = probed.result
        assert reply.status == 401, reply.body
        # exp is refused by its range; PyJWT already calls an iat that far ahead "not yet valid".
        assert reply.error["message"].startswith("authentication failed: user token ")
        assert_responsive(probed)


@pytest.mark.parametrize("header", ["Authorization", "X-Scope-Token"])
async def test_a_repeated_credential_header_is_refused_not_last_wins(
    http: httpx.AsyncClient, modern: McpTestClient, dev_identity: DevIdentity, header: str
) -> None:
    headers = list(modern.envelope_headers("tools/call", "workflow_get_status").items())
    headers += list(modern.auth.items())
    other = auth_headers(dev_identity, dev_identity.user_token(user_id="mallory"))
    headers.append((header, other[header]))
    body = call_body(modern, "workflow_get_status", status_args())
    probed = await while_probing(http, raw_post(http, body, headers))
    response: httpx.Response = probed.result
    assert response.status_code == 400
    assert f"more than one {header.lower()} header" in response.json()["error"]["message"]
    assert_responsive(probed)


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_post_mcp_without_a_json_content_type_is_415(
    http: httpx.AsyncClient, modern: McpTestClient, content_type: str | None
) -> None:
    headers = {**modern.envelope_headers("tools/list"), **modern.auth}
    del headers["Content-Type"]
    if content_type is not None:
        headers["Content-Type"] = content_type
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": modern.params_with_meta({}),
    }
    body = json.dumps(message).encode()
    request = http.build_request("POST", "/mcp", content=body, headers=headers)
    if content_type is None:
        request.headers.pop("Content-Type", None)
    probed = await while_probing(http, http.send(request))
    response: httpx.Response = probed.result
    assert response.status_code == 415
    assert "application/json" in response.json()["error"]["message"]
    assert_responsive(probed)


async def test_a_json_content_type_with_a_charset_is_served(
    http: httpx.AsyncClient, modern: McpTestClient
) -> None:
    headers = {**modern.envelope_headers("tools/list"), **modern.auth}
    headers["Content-Type"] = "application/json; charset=utf-8"
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": modern.params_with_meta({}),
    }
    response = await http.post("/mcp", content=json.dumps(message), headers=headers)
    assert response.status_code == 200


async def test_a_uid_longer_than_the_store_holds_is_input_invalid_and_not_retryable(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    hostile = client(http, dev_identity, user_id="u" * 500)
    probed = await while_probing(http, hostile.call_tool("workflow_get_status", status_args()))
    error = refused(probed.result, "WORKFLOW_INPUT_INVALID")["error"]
    assert error["retryable"] is False
    assert "uid" in error["message"] and "126" in error["message"]
    assert_responsive(probed)
