"""`call: http` and `call: mcp` specs (the MCP shorthand is rewritten to the official form)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runtime.engine.cel.value_trees import expression_text
from runtime.engine.model import (
    CredentialPolicy,
    HttpCallSpec,
    McpCallSpec,
    TaskKind,
    TaskSpec,
    freeze,
)
from runtime.engine.parse.definition_errors import DefinitionError
from runtime.engine.parse.light_workflow_hints import interpolation_hint
from runtime.engine.parse.parse_context import ParseContext, reject_unknown, require_mapping

DEFAULT_MCP_ENDPOINT = "/mcp"
DEFAULT_PROTOCOL_VERSION = "2025-06-18"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ABSOLUTE = re.compile(r"^(?P<scheme>https?)://(?P<authority>[^/?#{}\s]+)(?P<rest>[/?#][^\s]*)?$")
_HTTP_FIELDS = {"method", "endpoint", "headers", "query", "body", "output", "redirect"}
_MCP_FIELDS = {"method", "parameters", "transport", "protocolVersion", "timeout", "client"}
_REJECTED_CALLS = {
    "a2a": "agent-to-agent calls have unknown duration",
    "grpc": "it is not implemented in v1",
    "openapi": "it is not implemented in v1",
    "asyncapi": "it waits for messages",
}
_MCP_SHORTHAND = {"endpoint", "tool", "arguments"}
# What a `call: mcp` policy may do: the Gateway call always carries the run's user token in
# Authorization (the Gateway's own check), so only an added API-key header can join it.
_MCP_SCHEMES = frozenset({"runCredential", "apiKey"})


def parse_call(
    node: Mapping[str, Any], pointer: str, ctx: ParseContext
) -> tuple[TaskKind, TaskSpec]:
    """Parse a call task: http or mcp; every other call kind is rejected."""
    call = node["call"]
    # Checked before any lookup: a list or map here is unhashable and would crash the parser.
    if not isinstance(call, str):
        raise DefinitionError(
            "`call` must be a function name (http or mcp)", task=pointer, rule="rejected-call-kind"
        )
    if call in _REJECTED_CALLS:
        raise DefinitionError(
            f"call: {call} is rejected: {_REJECTED_CALLS[call]}; use call: http or call: mcp",
            task=pointer,
            rule="rejected-call-kind",
        )
    if call == "http":
        return "http", _parse_http(node, pointer, ctx)
    if call == "mcp":
        return "mcp", _parse_mcp(node, pointer, ctx)
    raise DefinitionError(
        f"call: {call!r} (custom or catalog function) is rejected: cannot be bounded; "
        "use call: http or call: mcp",
        task=pointer,
        rule="rejected-call-kind",
    )


def check_endpoint_template(uri: Any, pointer: str) -> str:
    """A literal absolute http(s) URI whose `{name}` placeholders sit only in the path."""
    if not isinstance(uri, str) or expression_text(uri) is not None:
        raise DefinitionError(
            "the endpoint must be a literal URI or path template: no expression may decide "
            "the scheme or host (it must match a published endpoint target)",
            task=pointer,
            rule="endpoint",
        )
    if "${" in uri:
        raise DefinitionError(
            f"the endpoint {uri!r} has `${{ }}` inside a URI, and expressions are never "
            "interpolated: use a URI template placeholder `{name}` (filled from the task "
            "input's top-level field `name`, e.g. http://host/items/{id}); a whole-string "
            "expression is not accepted for an endpoint either, since no expression may decide "
            f"the scheme or host{interpolation_hint()}",
            task=pointer,
            rule="endpoint",
        )
    match = _ABSOLUTE.match(uri)
    if match is None:
        raise DefinitionError(
            f"the endpoint {uri!r} must be an absolute http(s) URI", task=pointer, rule="endpoint"
        )
    rest = match.group("rest") or ""
    path, _, tail = rest.partition("?")
    if "{" in tail or "}" in tail or "#" in path:
        raise DefinitionError("template placeholders are allowed only in the path", task=pointer)
    if "{" in _PLACEHOLDER.sub("", path) or "}" in _PLACEHOLDER.sub("", path):
        raise DefinitionError("only simple {name} placeholders are allowed", task=pointer)
    return uri


def _parse_http(node: Mapping[str, Any], pointer: str, ctx: ParseContext) -> HttpCallSpec:
    args = require_mapping(node.get("with"), "call.with", pointer)
    reject_unknown(args, _HTTP_FIELDS, "call: http with", pointer)
    method = args.get("method")
    if not isinstance(method, str) or not method.isalpha():
        raise DefinitionError("with.method is required", task=pointer)
    endpoint = args.get("endpoint")
    authentication = None
    if isinstance(endpoint, Mapping):
        reject_unknown(endpoint, {"uri", "authentication"}, "endpoint", pointer)
        authentication = _authentication(endpoint.get("authentication"), pointer, ctx)
        endpoint = endpoint.get("uri")
    uri = check_endpoint_template(endpoint, pointer)
    output = args.get("output", "content")
    if output not in ("content", "response", "raw"):
        raise DefinitionError("with.output is content, response or raw", task=pointer)
    redirect = args.get("redirect", False)
    if not isinstance(redirect, bool):
        raise DefinitionError("with.redirect must be a boolean", task=pointer)
    for key in ("headers", "query"):
        value = args.get(key)
        if value is not None and not isinstance(value, Mapping) and expression_text(value) is None:
            raise DefinitionError(f"with.{key} must be a string map or an expression", task=pointer)
    return HttpCallSpec(
        method=method.upper(),
        endpoint=uri,
        headers=freeze(args.get("headers")),
        query=freeze(args.get("query")),
        body=freeze(args.get("body")),
        output=output,
        redirect=redirect,
        authentication=authentication,
        credential=None if authentication is None else ctx.credentials.get(authentication),
    )


def _authentication(value: Any, pointer: str, ctx: ParseContext) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) != {"use"} or not isinstance(value["use"], str):
        raise DefinitionError(
            "inline credentials are rejected; use {use: <authentication name>}", task=pointer
        )
    if value["use"] not in ctx.use.get("authentications", {}):
        raise DefinitionError(f"unknown use.authentications name {value['use']!r}", task=pointer)
    return str(value["use"])


def _mcp_credential(
    endpoint: Mapping[str, Any], pointer: str, ctx: ParseContext
) -> tuple[str | None, CredentialPolicy | None]:
    reject_unknown(endpoint, {"uri", "authentication"}, "with.transport.http.endpoint", pointer)
    name = _authentication(endpoint.get("authentication"), pointer, ctx)
    policy = None if name is None else ctx.credentials.get(name)
    if policy is not None and policy.scheme not in _MCP_SCHEMES:
        raise DefinitionError(
            f"call: mcp cannot use the {policy.scheme} policy {name!r}: the Gateway call "
            "carries the run's user token in Authorization; name an apiKey policy to add a "
            "header beside it",
            task=pointer,
            rule="secrets",
        )
    return name, policy


def _parse_mcp(node: Mapping[str, Any], pointer: str, ctx: ParseContext) -> McpCallSpec:
    args = require_mapping(node.get("with"), "call.with", pointer)
    if set(args) & _MCP_SHORTHAND and not set(args) & {"method", "transport", "parameters"}:
        args = _rewrite_shorthand(node, args, pointer)
    reject_unknown(args, _MCP_FIELDS, "call: mcp with", pointer)
    if args.get("method") != "tools/call":
        raise DefinitionError("call: mcp supports only method tools/call", task=pointer)
    transport = require_mapping(args.get("transport"), "with.transport", pointer)
    if "stdio" in transport:
        raise DefinitionError(
            "MCP stdio transport is rejected: it spawns processes; use transport: {http: ...}",
            task=pointer,
            rule="rejected-construct",
        )
    reject_unknown(transport, {"http", "options"}, "with.transport", pointer)
    http = require_mapping(transport.get("http"), "with.transport.http", pointer)
    reject_unknown(http, {"endpoint", "headers"}, "with.transport.http", pointer)
    endpoint = http.get("endpoint")
    authentication, credential = None, None
    if isinstance(endpoint, Mapping):
        authentication, credential = _mcp_credential(endpoint, pointer, ctx)
        endpoint = endpoint.get("uri")
    if endpoint != DEFAULT_MCP_ENDPOINT:
        endpoint = check_endpoint_template(endpoint, pointer)
        if _PLACEHOLDER.search(endpoint):
            raise DefinitionError("an MCP endpoint cannot be a template", task=pointer)
    parameters = require_mapping(args.get("parameters"), "with.parameters", pointer)
    reject_unknown(parameters, {"name", "arguments"}, "with.parameters", pointer)
    tool = parameters.get("name")
    if not isinstance(tool, str) or expression_text(tool) is not None or not tool:
        raise DefinitionError("parameters.name must be a literal pinned tool name", task=pointer)
    arguments = parameters.get("arguments", {})
    if not isinstance(arguments, Mapping) and expression_text(arguments) is None:
        raise DefinitionError("parameters.arguments must be a map or an expression", task=pointer)
    return McpCallSpec(
        tool=tool,
        arguments=freeze(arguments),
        endpoint=str(endpoint),
        protocol_version=str(args.get("protocolVersion", DEFAULT_PROTOCOL_VERSION)),
        client=freeze(args.get("client")),
        authentication=authentication,
        credential=credential,
    )


def _rewrite_shorthand(node: Any, args: Mapping[str, Any], pointer: str) -> dict[str, Any]:
    reject_unknown(args, _MCP_SHORTHAND, "call: mcp shorthand", pointer)
    endpoint = args.get("endpoint", {"uri": DEFAULT_MCP_ENDPOINT})
    uri = endpoint.get("uri") if isinstance(endpoint, Mapping) else endpoint
    parameters: dict[str, Any] = {"name": args.get("tool")}
    if "arguments" in args:
        parameters["arguments"] = args["arguments"]
    official = {
        "method": "tools/call",
        "parameters": parameters,
        "transport": {"http": {"endpoint": uri}},
    }
    node["with"] = official  # the stored normalized definition holds only the official form
    return official
