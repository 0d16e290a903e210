"""The checked transport on the wire: spelled addresses, the Gateway, and no environment proxy."""

from __future__ import annotations

import pytest

from runtime.addresses import LOOPBACK_NETWORKS, AddressPolicy, SystemResolver
from runtime.engine.run import HttpRequest, McpRequest
from runtime.errors import WorkflowError
from runtime.execution.outbound import send_http, send_mcp
from runtime.execution.outbound.transport import outbound_client
from runtime.execution.targets import HttpPolicy
from tests.support.execution import LocalServer, serving

pytestmark = pytest.mark.requirement("001:Underlying API And MCP Calls")

LOOPBACK = AddressPolicy.from_cidrs(LOOPBACK_NETWORKS)


def _get(uri: str) -> HttpRequest:
    return HttpRequest(
        task="t", method="GET", uri=uri, headers={}, query={}, body=None, redirect=False,
        authentication=None, write=False,
    )  # fmt: skip


async def _send(policy: AddressPolicy, uri: str, allowed_prefix: str) -> int:
    async with outbound_client(policy, SystemResolver()) as client:
        response = await send_http(
            client, _get(uri), HttpPolicy(None, (allowed_prefix,), None), timeout_s=10,
            connect_timeout_s=5, max_bytes=1 << 20, max_redirects=0,
        )  # fmt: skip
    return response.status_code


@pytest.mark.parametrize("spelling", ["2130706433", "0x7f000001", "127.1", "localhost"])
async def test_a_spelled_loopback_address_is_refused_at_connect_before_any_byte_leaves(
    spelling: str,
) -> None:
    async with serving(LocalServer()) as server:
        origin = f"http://{spelling}:{server.port}"
        with pytest.raises(WorkflowError) as refused:
            await _send(AddressPolicy(), f"{origin}/claims", f"{origin}/")
        # With the operator's allowance the same spelling connects to the address it spells.
        assert await _send(LOOPBACK, f"{origin}/claims", f"{origin}/") == 200
    assert refused.value.code.value == "WORKFLOW_POLICY_DENIED"
    assert "internal address space (loopback)" in refused.value.message
    assert [request["path"] for request in server.requests] == ["/claims"]


async def test_a_gateway_on_loopback_is_refused_without_the_allowance() -> None:
    request = McpRequest(
        task="t", endpoint="", tool="accounts.lookup", arguments={},
        protocol_version="2025-06-18", write=False,
    )  # fmt: skip
    client = outbound_client(AddressPolicy(), SystemResolver())
    async with serving(LocalServer()) as server, client:
        with pytest.raises(WorkflowError, match="internal address space"):
            await send_mcp(
                client, f"{server.base}/mcp", request, {}, timeout_s=10,
                connect_timeout_s=5, max_bytes=1 << 20,
            )  # fmt: skip
    assert server.tool_calls == []


async def test_proxies_from_the_environment_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy would resolve the name itself, past the check; nothing listens on port 9.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with serving(LocalServer()) as server:
        assert await _send(LOOPBACK, f"{server.base}/claims", f"{server.base}/") == 200
    assert [request["path"] for request in server.requests] == ["/claims"]
