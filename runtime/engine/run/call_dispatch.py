"""`call: http` and `call: mcp` through the effect port: build the request, map what comes back."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from runtime.engine.model import HttpCallSpec, McpCallSpec
from runtime.engine.parse.credentials import is_credential_header
from runtime.engine.run.faults import fault
from runtime.engine.run.ports import (
    EffectFailure,
    EffectPort,
    HttpRequest,
    HttpResponse,
    McpRequest,
)
from runtime.errors import error_registry

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
Evaluate = Callable[[Any], Any]
# Failures of the call's own credential keep their kind (401, or 403 for a missing secret).
_CREDENTIAL_KINDS = ("authentication", "authorization")


def expand_template(uri: str, data: Any, pointer: str) -> str:
    """Expand `{name}` from scalar top-level keys of the transformed input, percent-encoded."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        value = data.get(name) if isinstance(data, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise fault("expression", pointer, detail=f"URI template value {name!r} is not scalar")
        return quote(str(value), safe="")

    return _PLACEHOLDER.sub(replace, uri)


def _string_map(value: Any, what: str, pointer: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fault("expression", pointer, detail=f"{what} must be a map")
    result: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise fault("expression", pointer, detail=f"{what} value {key!r} must be a string")
        result[str(key)] = str(item)
    return result


def _task_headers(spec: HttpCallSpec, pointer: str, evaluate: Evaluate) -> dict[str, str]:
    headers = _string_map(evaluate(spec.headers), "headers", pointer)
    # Publication refuses a credential-like header written in a headers map; one produced by a
    # whole-map expression is only known now, and is refused the same way (run data must
    # never choose a credential).
    for name in headers:
        if is_credential_header(name):
            raise fault(
                "configuration",
                pointer,
                detail=f"header {name!r} carries a credential: only an authentication "
                "policy (use.authentications) may set it",
            )
    return headers


def build_http_request(
    spec: HttpCallSpec, pointer: str, data: Any, evaluate: Evaluate
) -> HttpRequest:
    """Evaluate the call's value trees into one request."""
    return HttpRequest(
        task=pointer,
        method=spec.method,
        uri=expand_template(spec.endpoint, data, pointer),
        headers=_task_headers(spec, pointer, evaluate),
        query=_string_map(evaluate(spec.query), "query", pointer),
        body=evaluate(spec.body) if spec.body is not None else None,
        redirect=spec.redirect,
        authentication=spec.authentication,
        write=spec.is_write,
        credential=spec.credential,
    )


async def dispatch_http(port: EffectPort, request: HttpRequest, spec: HttpCallSpec) -> Any:
    """Send the request; map transport failures and non-accepted statuses to communication."""
    try:
        response = await port.call_http(request)
    except EffectFailure as exc:
        kind = exc.kind if exc.kind in _CREDENTIAL_KINDS else "communication"
        raise fault(kind, request.task, status=exc.status, detail=exc.message) from None
    accepted = 200 <= response.status_code < 300 or (
        spec.redirect and 300 <= response.status_code < 400
    )
    if not accepted:
        raise fault(
            "communication",
            request.task,
            status=response.status_code,
            title="HTTP call failed",
            detail=_status_reason(response.status_code),
        )
    return _http_output(spec, request, response)


def _status_reason(status: int) -> str:
    if 300 <= status < 400:
        # The Location is the server's data: the reason says why it was not followed.
        return f"redirect refused: the call does not follow redirects (HTTP status {status})"
    return f"HTTP status {status}"


def _content(response: HttpResponse, pointer: str) -> Any:
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        try:
            return json.loads(response.body or b"null")
        except ValueError:
            raise fault("communication", pointer, detail="response is not valid JSON") from None
    if media.startswith("text/"):
        return response.body.decode("utf-8", errors="replace")
    return base64.b64encode(response.body).decode("ascii") if response.body else None


def http_output_of(spec: HttpCallSpec, request: HttpRequest, response: HttpResponse) -> Any:
    """The task output of an accepted response, as the call's `output` format says."""
    return _http_output(spec, request, response)


def _http_output(spec: HttpCallSpec, request: HttpRequest, response: HttpResponse) -> Any:
    if spec.output == "raw":
        return base64.b64encode(response.body).decode("ascii")
    content = _content(response, request.task)
    if spec.output == "content":
        return content
    return {
        "request": {"method": request.method, "uri": request.uri, "headers": request.headers},
        "statusCode": response.status_code,
        "headers": response.headers,
        "content": content,
    }


async def dispatch_mcp(
    port: EffectPort,
    spec: McpCallSpec,
    pointer: str,
    arguments: Any,
    write: bool,
    compensation: dict[str, Any] | None = None,
) -> Any:
    """Send tools/call; a transport failure is communication, a tool or RPC error runtime."""
    request = McpRequest(
        task=pointer,
        endpoint=spec.endpoint,
        tool=spec.tool,
        arguments=arguments,
        protocol_version=spec.protocol_version,
        write=write,
        credential=spec.credential,
        compensation=compensation if write else None,
    )
    try:
        result = await port.call_mcp(request)
    except EffectFailure as exc:
        # An unusable run credential is the runtime's own authentication error (401).
        kind = exc.kind if exc.kind in (*_CREDENTIAL_KINDS, "communication") else "runtime"
        raise fault(kind, pointer, status=exc.status, detail=exc.message) from None
    if not isinstance(result, Mapping) or result.get("isError") is True:
        failure = fault(
            "runtime", pointer, title="MCP tool call failed", detail=f"tool {spec.tool}"
        )
        failure.problem.update(_tool_error_class(result))
        raise failure
    return dict(result)


def _tool_error_class(result: Any) -> dict[str, Any]:
    """A tool error's registry code and retryable flag, when it is a Workflow error result.

    Only a registered code and a boolean: whether a retry can succeed (a policy refusal cannot)
    is the tool's to say, and neither is run data.
    """
    structured = result.get("structuredContent") if isinstance(result, Mapping) else None
    error = structured.get("error") if isinstance(structured, Mapping) else None
    if not isinstance(error, Mapping):
        return {}
    code, retryable = error.get("code"), error.get("retryable")
    registered = isinstance(code, str) and code in error_registry()
    if not registered or not isinstance(retryable, bool):
        return {}
    return {"code": code, "retryable": retryable}
