"""The wire side of outbound calls: bounded HTTP requests and MCP tools/call over HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urljoin

import httpx

from runtime.addresses import DestinationRefused
from runtime.engine.run import EffectFailure, HttpRequest, HttpResponse, McpRequest
from runtime.errors import WorkflowError
from runtime.execution.outbound.decoding import BodyDecoder
from runtime.execution.outbound.endpoint_label import observed_http, observed_mcp
from runtime.execution.targets import HttpPolicy, refused_destination
from runtime.telemetry import inject_trace

_REDIRECTS = (301, 302, 303, 307, 308)
_OUTSIDE_TARGETS = "redirect to a URI outside the endpoint targets refused"
# Only these keep method and body on a redirect; 301/302/303 turn a write into a plain GET.
_METHOD_PRESERVING = (307, 308)
_SAFE_METHODS = ("GET", "HEAD")


class GatewayUnauthorized(EffectFailure):
    """HTTP 401 from the Gateway; `before_call` when the tools/call itself was not yet sent."""

    def __init__(self, *, before_call: bool) -> None:
        super().__init__("communication", "the Gateway refused the call", 401)
        self.before_call = before_call


def _timeout(seconds: float, connect_s: float) -> httpx.Timeout:
    seconds = max(seconds, 0.001)
    return httpx.Timeout(seconds, connect=min(seconds, connect_s))


async def _read_bounded(response: httpx.Response, max_bytes: int) -> bytes:
    """The decoded body; both the bytes on the wire and the decoded bytes stay within max_bytes."""
    decoder = BodyDecoder(response.headers.get("content-encoding"), max_bytes)
    body, received = bytearray(), 0
    async for chunk in response.aiter_raw():
        received += len(chunk)
        if received > max_bytes:
            raise EffectFailure("communication", f"response larger than {max_bytes} bytes")
        body.extend(decoder.feed(chunk))
    body.extend(decoder.finish())
    return bytes(body)


def encode_body(body: Any) -> bytes | None:
    """The request body as sent: JSON for structured values, UTF-8 for strings."""
    if body is None:
        return None
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@observed_http
async def send_http(
    client: httpx.AsyncClient,
    request: HttpRequest,
    policy: HttpPolicy,
    *,
    timeout_s: float,
    connect_timeout_s: float,
    max_bytes: int,
    max_redirects: int,
) -> HttpResponse:
    """Send one request; redirects are followed only on the same origin and only when asked.

    The whole call, redirects and body included, ends within timeout_s: httpx bounds each
    phase only, so a server dripping bytes could otherwise hold it far longer.
    """
    try:
        async with asyncio.timeout(max(timeout_s, 0.001)):
            return await _send_following(
                client, request, policy, timeout_s, connect_timeout_s, max_bytes, max_redirects
            )
    except TimeoutError:
        raise EffectFailure("communication", "the HTTP call timed out") from None


async def _send_following(
    client: httpx.AsyncClient,
    request: HttpRequest,
    policy: HttpPolicy,
    timeout_s: float,
    connect_timeout_s: float,
    max_bytes: int,
    max_redirects: int,
) -> HttpResponse:
    body = encode_body(request.body)
    headers = dict(request.headers)
    inject_trace(headers)
    if body is not None and not isinstance(request.body, str):
        headers.setdefault("content-type", "application/json")
    uri, method = request.uri, request.method.upper()
    for _ in range(max_redirects + 1):
        outgoing = client.build_request(
            method, uri, headers=headers, params=request.query or None, content=body,
            timeout=_timeout(timeout_s, connect_timeout_s),
        )  # fmt: skip
        try:
            response = await client.send(outgoing, stream=True, follow_redirects=False)
            try:
                content = await _read_bounded(response, max_bytes)
            finally:
                await response.aclose()
        except httpx.TimeoutException:
            raise EffectFailure("communication", "the HTTP call timed out") from None
        except DestinationRefused as refused:
            raise refused_destination(refused.reason) from None
        except httpx.HTTPError as exc:
            raise EffectFailure(
                "communication", f"HTTP transport error: {type(exc).__name__}"
            ) from None
        location = response.headers.get("location")
        if not (request.redirect and response.status_code in _REDIRECTS and location):
            return _response(response, content)
        target = urljoin(uri, location)
        if not policy.same_origin(uri, target):
            # Never follow to another host (a write above all): hand the 3xx back instead.
            return _response(response, content)
        if response.status_code not in _METHOD_PRESERVING and (
            response.status_code == 303 or method not in _SAFE_METHODS
        ):
            # Re-sending the write here would repeat it: the redirect asks for a read.
            method = "HEAD" if method == "HEAD" else "GET"
            body = None
            headers = _without_body_headers(headers)
        try:
            policy.check(method, target)
        except WorkflowError as refused:
            # The refusal would show the Location's path (server data): keep only the reason.
            raise WorkflowError(refused.code, _OUTSIDE_TARGETS, status="failed") from None
        uri = target
    raise EffectFailure("communication", "too many redirects")


def _without_body_headers(headers: dict[str, str]) -> dict[str, str]:
    dropped = {"content-type", "content-length", "content-encoding", "transfer-encoding"}
    return {name: value for name, value in headers.items() if name.lower() not in dropped}


def _response(response: httpx.Response, content: bytes) -> HttpResponse:
    headers = {name.lower(): value for name, value in response.headers.items()}
    return HttpResponse(status_code=response.status_code, headers=headers, body=content)


@observed_mcp
async def send_mcp(
    client: httpx.AsyncClient,
    url: str,
    request: McpRequest,
    headers: dict[str, str],
    *,
    timeout_s: float,
    connect_timeout_s: float,
    max_bytes: int,
) -> dict[str, Any]:
    """initialize, notifications/initialized, then tools/call; returns the call's result."""
    base = {
        **headers,
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": request.protocol_version,
    }
    inject_trace(base)
    timeout = _timeout(timeout_s, connect_timeout_s)
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": request.protocol_version,
            "capabilities": {},
            "clientInfo": {"name": "workflow-mcp", "version": "0.1.0"},
        },
    }
    try:
        async with asyncio.timeout(max(timeout_s, 0.001)):
            return await _call_tool(client, url, request, base, init, timeout, max_bytes)
    except (httpx.TimeoutException, TimeoutError):
        raise EffectFailure("communication", "the MCP call timed out") from None
    except DestinationRefused as refused:
        raise refused_destination(refused.reason) from None
    except httpx.HTTPError as exc:
        raise EffectFailure("communication", f"MCP transport error: {type(exc).__name__}") from None


async def _call_tool(
    client: httpx.AsyncClient,
    url: str,
    request: McpRequest,
    base: dict[str, str],
    init: dict[str, Any],
    timeout: httpx.Timeout,
    max_bytes: int,
) -> dict[str, Any]:
    first = await _post(client, url, base, init, timeout, max_bytes)
    session = first[1].get("mcp-session-id")
    if session:
        base["mcp-session-id"] = session
    # Every later request names the version the server chose in its initialize answer (the
    # MCP transport's rule): a server that answered with another version than the one asked
    # for refuses the requested one on the notification and the call.
    negotiated = _negotiated_version(first[0])
    if negotiated is not None:
        base["mcp-protocol-version"] = negotiated
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await _post(client, url, base, note, timeout, max_bytes)
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": request.tool, "arguments": request.arguments or {}},
    }
    message, _ = await _post(client, url, base, call, timeout, max_bytes)
    if not isinstance(message, dict) or "error" in message:
        raise EffectFailure("runtime", "the MCP server returned a JSON-RPC error")
    result = message.get("result")
    if not isinstance(result, dict):
        raise EffectFailure("runtime", "the MCP response has no result")
    return result


def _negotiated_version(message: Any) -> str | None:
    result = message.get("result") if isinstance(message, dict) else None
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    return version if isinstance(version, str) and version else None


async def _post(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    payload: dict[str, Any],
    timeout: httpx.Timeout,
    max_bytes: int,
) -> tuple[Any, httpx.Headers]:
    outgoing = client.build_request("POST", url, headers=headers, json=payload, timeout=timeout)
    response = await client.send(outgoing, stream=True, follow_redirects=False)
    try:
        content = await _read_bounded(response, max_bytes)
    finally:
        await response.aclose()
    if response.status_code == 401:
        raise GatewayUnauthorized(before_call=payload.get("method") != "tools/call")
    if response.status_code == 403:
        raise EffectFailure("communication", "the Gateway refused the call", response.status_code)
    if response.status_code >= 400:
        raise EffectFailure("communication", "the MCP call failed", response.status_code)
    if "id" not in payload or not content:
        return None, response.headers
    return _message(content, response.headers.get("content-type", "")), response.headers


def _message(content: bytes, content_type: str) -> Any:
    try:
        if content_type.startswith("text/event-stream"):
            data = [
                line[5:].strip()
                for line in content.decode("utf-8").splitlines()
                if line.startswith("data:")
            ]
            return json.loads(data[-1]) if data else None
        return json.loads(content)
    except ValueError:
        raise EffectFailure("runtime", "the MCP response is not JSON") from None
