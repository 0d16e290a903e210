"""MCP over HTTP to Workflow or the Gateway: one JSON-RPC tools/call per POST /mcp.

Every answer is classified without interpreting business codes: a receipt
(structuredContent of a successful result), a Tool error (an isError result's error object),
or a protocol error (a JSON-RPC error, an HTTP error status, a body that is not the JSON-RPC
answer). A connection or timeout failure raises TransportFailure: the request may or may not
have reached Workflow. Tokens go in headers only and never into a message.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any, Literal

import httpx

PROTOCOL_VERSION = "2025-11-25"
DEFAULT_URL = "http://127.0.0.1:8788/mcp"
TIMEOUT_SECONDS = 60.0


class TransportFailure(Exception):
    """No answer: the connection failed, timed out or closed before the response."""


@dataclass(frozen=True)
class Answer:
    """What Workflow (or the Gateway) answered to one tools/call."""

    kind: Literal["receipt", "tool-error", "protocol-error"]
    receipt: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def code(self) -> str:
        """The error code (empty for a receipt)."""
        return str((self.error or {}).get("code", ""))

    @property
    def message(self) -> str:
        """The error message (empty for a receipt)."""
        return str((self.error or {}).get("message", ""))


class WorkflowClient:
    """Calls publication tools with the acting user's bearer (and a scope bearer if given)."""

    def __init__(
        self,
        url: str,
        token: str,
        scope_token: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = TIMEOUT_SECONDS,
    ) -> None:
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        }
        if scope_token:
            headers["X-Scope-Token"] = f"Bearer {scope_token}"
        self.url = url
        self._http = httpx.Client(headers=headers, transport=transport, timeout=timeout)
        self._ids = itertools.count(1)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def call(self, tool: str, arguments: dict[str, Any]) -> Answer:
        """tools/call; TransportFailure when no answer came back."""
        message = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        try:
            response = self._http.post(self.url, content=json.dumps(message))
        except httpx.TransportError as error:
            raise TransportFailure(f"{type(error).__name__}: {error}") from None
        return classify(response)


def _protocol_error(code: str, message: str) -> Answer:
    return Answer("protocol-error", error={"code": code, "message": message})


def _body(response: httpx.Response) -> Any:
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        # A streamed answer: the last `data:` line carries the JSON-RPC response.
        lines = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = lines[-1] if lines else ""
    return json.loads(text)


def classify(response: httpx.Response) -> Answer:
    """Sort one HTTP response into receipt, Tool error or protocol error."""
    try:
        body = _body(response)
    except ValueError:
        return _protocol_error(f"HTTP_{response.status_code}", "the answer is not JSON")
    if not isinstance(body, dict):
        return _protocol_error(f"HTTP_{response.status_code}", "the answer is not JSON-RPC")
    if "error" in body:
        error = body["error"] if isinstance(body["error"], dict) else {}
        return _protocol_error(f"JSONRPC_{error.get('code')}", str(error.get("message", "")))
    result = body.get("result")
    if response.status_code != 200 or not isinstance(result, dict):
        return _protocol_error(f"HTTP_{response.status_code}", "no tools/call result")
    structured = result.get("structuredContent")
    if not isinstance(structured, dict):
        return _protocol_error("NO_STRUCTURED_CONTENT", "the result has no structuredContent")
    if result.get("isError"):
        failure = structured.get("error")
        if not isinstance(failure, dict):
            return _protocol_error("MALFORMED_ERROR", "an isError result without an error object")
        return Answer("tool-error", error=dict(failure))
    return Answer("receipt", receipt=dict(structured))
