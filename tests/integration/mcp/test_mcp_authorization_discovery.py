"""MCP authorization discovery: the 401 challenge, protected resource metadata, /metrics type."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from runtime.security.devtools import DEV_ISSUER, DevIdentity
from tests.support.mcp import MODERN, McpTestClient

METADATA_URL = "http://localhost/.well-known/oauth-protected-resource"


def _start_args() -> dict[str, Any]:
    return {
        "name": "workflow_start",
        "arguments": {"wfDefId": "00000000-0000-4000-8000-000000000001", "input": {}},
    }


@pytest.mark.requirement("000:Request host and identity")
@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
async def test_a_request_without_credentials_is_challenged_without_an_error_code(
    http: httpx.AsyncClient, method: str
) -> None:
    client = McpTestClient(http, MODERN, {})
    params = _start_args() if method == "tools/call" else None
    reply = await client.request(method, params)
    assert reply.status == 401
    challenge = reply.headers["www-authenticate"]
    # RFC 6750 section 3.1: no error code when the request carried no credentials.
    assert challenge.startswith("Bearer ") and "error=" not in challenge
    assert f'resource_metadata="{METADATA_URL}"' in challenge


@pytest.mark.requirement("000:Request host and identity")
@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
async def test_an_invalid_bearer_is_challenged_with_invalid_token(
    http: httpx.AsyncClient, dev_identity: DevIdentity, method: str
) -> None:
    client = McpTestClient(http, MODERN, {})
    params = _start_args() if method == "tools/call" else None
    expired = {"Authorization": f"Bearer {dev_identity.user_token(expired=True)}"}
    reply = await client.request(method, params, headers=expired)
    assert reply.status == 401
    challenge = reply.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="{METADATA_URL}"' in challenge


@pytest.mark.requirement("000:Request host and identity")
async def test_the_protected_resource_metadata_names_the_mcp_endpoint_and_the_user_issuer(
    http: httpx.AsyncClient,
) -> None:
    reply = await http.get("/.well-known/oauth-protected-resource")
    assert reply.status_code == 200
    document = reply.json()
    assert document["resource"] == "http://localhost/mcp"
    assert document["authorization_servers"] == [DEV_ISSUER]


async def test_metrics_name_their_charset_once(http: httpx.AsyncClient) -> None:
    reply = await http.get("/metrics")
    assert reply.status_code == 200
    content_type = reply.headers["content-type"]
    assert content_type.startswith("text/plain")
    assert content_type.count("charset=") == 1
