"""Calls to Workflow's MCP endpoint: the user bearer, the Gateway bearer, the caller's trace.

Every call carries the verified user bearer in Authorization and the Gateway's own application
bearer in X-Scope-Token (seed 000 "Gateway assertion"), and the current W3C traceparent.
Only a transport failure or timeout is WorkflowUnreachable; an answer from Workflow, refusal or
not, is returned (a result) or raised as the same JSON-RPC fault (an error).

One client per process, made at start-up: its keep-alive connections are reused by every call.
On the wire it is gateway.wire's lean HTTP/1.1 poster; an injected httpx transport (the tests'
in-process Workflow) goes through httpx instead.
"""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from gateway.caller import Caller
from gateway.credentials import AppTokenSource, GatewayConfigurationError
from gateway.wire import JsonPoster, WireError
from runtime.mcp import LEGACY_VERSION, JsonRpcFault, bearer_challenge
from runtime.telemetry import inject_trace

# Connections kept to Workflow: every waiting workflow-backed call holds one.
MAX_CONNECTIONS = 256


class WorkflowUnreachable(Exception):
    """Workflow could not be reached or did not answer in time (a transport failure)."""


class WorkflowClient:
    """One Workflow MCP endpoint, spoken to in the stateless 2025-11-25 era."""

    def __init__(
        self,
        url: str,
        tokens: AppTokenSource,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self._tokens = tokens
        self._http: httpx.AsyncClient | None = None
        self._wire: JsonPoster | None = None
        if transport is None:
            try:
                self._wire = JsonPoster(url, max_connections=MAX_CONNECTIONS)
            except ValueError:
                raise GatewayConfigurationError(
                    f"gateway.workflow_url {url!r} is not an http(s) URL"
                ) from None
        else:
            limits = httpx.Limits(
                max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
            )
            self._http = httpx.AsyncClient(transport=transport, limits=limits, trust_env=False)

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._wire is not None:
            await self._wire.aclose()
        if self._http is not None:
            await self._http.aclose()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], caller: Caller, *, timeout_s: float
    ) -> dict[str, Any]:
        """Workflow's CallToolResult; JsonRpcFault for its JSON-RPC error answers."""
        params = {"name": name, "arguments": arguments}
        return await self.request(LEGACY_VERSION, "tools/call", params, caller, timeout_s=timeout_s)

    async def request(
        self,
        era: str,
        method: str,
        params: dict[str, Any],
        caller: Caller,
        *,
        timeout_s: float,
        capabilities: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One request to Workflow in era (2026-07-28: with the envelope and capabilities)."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "MCP-Protocol-Version": era,
            "Authorization": f"Bearer {caller.user_token.reveal()}",
            "X-Scope-Token": f"Bearer {self._tokens.token_for(caller.host_id).reveal()}",
        }
        if era != LEGACY_VERSION:
            headers["Mcp-Method"] = method
            named = params.get("taskId", params.get("name"))
            if isinstance(named, str):
                headers["Mcp-Name"] = named
            params = {**params, "_meta": _modern_meta(era, capabilities or {})}
        inject_trace(headers)
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        content = msgspec.json.encode(message)
        if self._wire is not None:
            try:
                status, answer = await self._wire.post(content, headers, timeout_s=timeout_s)
            except WireError as error:
                raise WorkflowUnreachable(str(error)) from None
            return _answer(status, answer)
        assert self._http is not None
        try:
            response = await self._http.post(
                self.url, content=content, headers=headers, timeout=timeout_s
            )
        except httpx.TransportError as error:
            raise WorkflowUnreachable(type(error).__name__) from None
        return _answer(response.status_code, response.content)


def _modern_meta(era: str, capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": era,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "workflow-mcp-gateway", "version": "0.1.0"},
    }


def _answer(status_code: int, content: bytes) -> dict[str, Any]:
    try:
        body = msgspec.json.decode(content)
    except msgspec.DecodeError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("result"), dict):
        result: dict[str, Any] = body["result"]
        return result
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        headers = {}
        if status_code == 401:
            headers["WWW-Authenticate"] = bearer_challenge(credentials_sent=True)
        raise JsonRpcFault(
            error["code"],
            str(error.get("message", "")),
            data=error.get("data"),
            http_status=status_code,
            headers=headers,
        )
    # Not a JSON-RPC answer (a proxy's error page, a cut body): Workflow did not answer.
    raise WorkflowUnreachable(f"HTTP {status_code} without a JSON-RPC body")
