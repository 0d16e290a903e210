"""The MCP JSON-RPC server: one POST in, one reply out, for both protocol eras."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.mcp.bearer_gate import BearerGate
from runtime.mcp.jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    DecodedBody,
    JsonRpcFault,
    RequestId,
    decode_body,
    is_request_id,
    result_response,
)
from runtime.mcp.ports import TaskCalls, ToolCalls, ToolPages
from runtime.mcp.protocol import (
    LEGACY_VERSION,
    MODERN_VERSION,
    SERVER_INFO_KEY,
    SUPPORTED_VERSIONS,
    Era,
    EraContext,
    resolve_era,
)
from runtime.mcp.tasks import (
    EXTENSION,
    LEGACY_TASK_METHODS,
    MODERN_TASK_METHODS,
    InputRequired,
    InputRound,
    declares_extension,
    missing_capability,
)

_LEGACY_STATUS_200 = frozenset({400, 404})

SERVER_INFO = {"name": "workflow-mcp", "version": "0.1.0"}
INSTRUCTIONS = (
    "Durable workflows as MCP tools: publish definitions and bindings, invoke bindings, "
    "start workflows and follow their lifecycle."
)


@dataclass(frozen=True)
class HttpReply:
    """An HTTP answer: status, optional JSON body and extra headers."""

    status: int
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


class McpServer:
    """Handles decoded HTTP POSTs to /mcp."""

    def __init__(
        self,
        registry: ToolPages,
        dispatcher: ToolCalls,
        *,
        page_size: int = 50,
        list_ttl_ms: int = 300_000,
        gate: BearerGate | None = None,
        server_info: dict[str, str] | None = None,
        instructions: str = INSTRUCTIONS,
        list_cache_scope: str = "public",
        tasks: TaskCalls | None = None,
    ) -> None:
        # MCP tasks (issue 35): None serves neither revision's tasks.
        self.tasks = tasks
        # "private" when tools/list depends on the caller (the Gateway filters it by role).
        self.list_cache_scope = list_cache_scope
        self.server_info = SERVER_INFO if server_info is None else server_info
        self.instructions = instructions
        self.registry = registry
        self.gate = gate
        self.dispatcher = dispatcher
        self.page_size = page_size
        self.list_ttl_ms = list_ttl_ms

    async def handle_post(
        self, body: bytes, headers: Mapping[str, str], decoded: DecodedBody | None = None
    ) -> HttpReply:
        """Answer one POST body; headers are keyed by lower-case name.

        decoded: the body as decode_body already made it in front of the app (the front door's
        read of a workflow_invoke call), so it is decoded once.
        """
        try:
            message = decoded.message if decoded is not None else decode_json(body)
        except JsonRpcFault as parse_failure:
            return _fault_reply(parse_failure, None)
        if not isinstance(message, dict):
            fault = JsonRpcFault(INVALID_REQUEST, "invalid request: expected one JSON-RPC object")
            return _fault_reply(fault, None)
        if message.get("jsonrpc") != "2.0":
            return _fault_reply(JsonRpcFault(INVALID_REQUEST, "invalid request: jsonrpc"), None)
        if "method" not in message:
            if "result" in message or "error" in message:
                # A response from the client: this server sends no requests, nothing to answer.
                return HttpReply(202)
            return _fault_reply(JsonRpcFault(INVALID_REQUEST, "invalid request: method"), None)
        is_notification = "id" not in message
        raw_id = message.get("id")
        if not is_notification and not is_request_id(raw_id):
            return _fault_reply(JsonRpcFault(INVALID_REQUEST, "invalid request: id"), None)
        request_id: RequestId = raw_id if is_request_id(raw_id) else 0
        method = message.get("method")
        params = message.get("params", {})
        if not isinstance(method, str) or not isinstance(params, dict):
            fault = JsonRpcFault(INVALID_REQUEST, "invalid request: method and params")
            return _fault_reply(fault, None if is_notification else request_id)
        try:
            era = resolve_era(message, headers)
        except JsonRpcFault as fault:
            return _fault_reply(fault, None if is_notification else request_id)
        try:
            if self.gate is not None:
                self.gate.check(method, headers)
        except JsonRpcFault as fault:
            return _fault_reply(fault, None if is_notification else request_id)
        if is_notification:
            return HttpReply(202)
        try:
            result = await self._dispatch(era, method, params, headers)
        except JsonRpcFault as fault:
            if era.era is Era.LEGACY and fault.http_status in _LEGACY_STATUS_200:
                # 2025-11-25 clients read 404 as "session expired" and re-initialize; method
                # and parameter errors travel in the JSON-RPC body with 200 there.
                fault.http_status = 200
            return _fault_reply(fault, request_id)
        return HttpReply(200, result_response(request_id, result))

    async def _dispatch(
        self, era: EraContext, method: str, params: dict[str, Any], headers: Mapping[str, str]
    ) -> dict[str, Any]:
        if era.era is Era.LEGACY:
            return await self._dispatch_legacy(method, params, headers)
        return await self._dispatch_modern(method, params, headers, era.client_capabilities)

    async def _dispatch_legacy(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str]
    ) -> dict[str, Any]:
        if method == "initialize":
            capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
            if self.tasks is not None:
                capabilities["tasks"] = {
                    "list": {},
                    "cancel": {},
                    "requests": {"tools": {"call": {}}},
                }
            return {
                "protocolVersion": LEGACY_VERSION,
                "capabilities": capabilities,
                "serverInfo": self.server_info,
                "instructions": self.instructions,
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            tools, next_cursor = self.registry.page(params.get("cursor"), self.page_size)
            if self.tasks is not None:
                tools = [self._with_task_support(tool) for tool in tools]
            return _with_cursor({"tools": tools}, next_cursor)
        if method == "tools/call":
            name = params.get("name")
            task = params.get("task")
            # A call without params.task (every workflow_invoke) pays one isinstance here; a
            # tool whose taskSupport is "required" refuses it in its ToolCalls (the Gateway's).
            if isinstance(task, dict) and self._task_support(name) is not None:
                assert self.tasks is not None
                started = await self.tasks.start(
                    name, params.get("arguments"), headers, LEGACY_VERSION, task.get("ttl")
                )
                if isinstance(started, dict):
                    return {"task": started}
                assert not isinstance(started, InputRequired)  # no rounds in this era
                return started.to_call_result()
            outcome = await self.dispatcher.call(name, params.get("arguments"), headers)
            return outcome.to_call_result()
        if self.tasks is not None and method in LEGACY_TASK_METHODS:
            return await self.tasks.answer(method, params, headers, LEGACY_VERSION)
        raise JsonRpcFault(METHOD_NOT_FOUND, f"method not found: {method[:100]}")

    async def _dispatch_modern(
        self,
        method: str,
        params: dict[str, Any],
        headers: Mapping[str, str],
        capabilities: Mapping[str, Any],
    ) -> dict[str, Any]:
        meta = {SERVER_INFO_KEY: self.server_info}
        if method == "server/discover":
            served: dict[str, Any] = {"tools": {"listChanged": False}}
            if self.tasks is not None:
                served["extensions"] = {EXTENSION: {}}
            return {
                "resultType": "complete",
                "supportedVersions": [MODERN_VERSION, LEGACY_VERSION],
                "capabilities": served,
                "instructions": self.instructions,
                "ttlMs": self.list_ttl_ms,
                "cacheScope": "public",
                "_meta": meta,
            }
        if method == "tools/list":
            tools, next_cursor = self.registry.page(params.get("cursor"), self.page_size)
            body = {
                "resultType": "complete",
                "tools": tools,
                "ttlMs": self.list_ttl_ms,
                "cacheScope": self.list_cache_scope,
                "_meta": meta,
            }
            return _with_cursor(body, next_cursor)
        if method == "tools/call":
            name = params.get("name")
            # The task branch: a type check and a set lookup (the Gateway: a dict lookup).
            support = self._task_support(name)
            declared = support is not None and declares_extension(capabilities)
            if support == "required" and not declared:
                raise missing_capability()
            if declared:
                assert self.tasks is not None
                rounds = InputRound(params.get("inputResponses"), "elicitation" in capabilities)
                started = await self.tasks.start(
                    name, params.get("arguments"), headers, MODERN_VERSION, rounds=rounds
                )
                if isinstance(started, dict):
                    return {"resultType": "task", **started, "_meta": meta}
                if isinstance(started, InputRequired):
                    inputs = started.requests
                    return {"resultType": "input_required", "inputRequests": inputs, "_meta": meta}
                outcome = started
            else:
                outcome = await self.dispatcher.call(name, params.get("arguments"), headers)
            result = outcome.to_call_result()
            # A tool's own _meta (the Gateway's workflow ids) travels beside the server's.
            if tool_meta := result.get("_meta"):
                meta = {**tool_meta, **meta}
            return {"resultType": "complete", **result, "_meta": meta}
        if self.tasks is not None and method in MODERN_TASK_METHODS:
            if not declares_extension(capabilities):
                raise missing_capability()
            body = await self.tasks.answer(method, params, headers, MODERN_VERSION)
            return {"resultType": "complete", **body, "_meta": meta}
        raise JsonRpcFault(METHOD_NOT_FOUND, f"method not found: {method[:100]}")

    def _task_support(self, name: Any) -> str | None:
        # A name that is no string (a list, an object) is the dispatcher's "unknown tool".
        if self.tasks is None or type(name) is not str:
            return None
        return self.tasks.task_support(name)

    def _with_task_support(self, tool: dict[str, Any]) -> dict[str, Any]:
        """A 2025-11-25 Tool with its execution.taskSupport, when it has one."""
        support = self._task_support(tool.get("name"))
        if support is None:
            return tool
        return {**tool, "execution": {**(tool.get("execution") or {}), "taskSupport": support}}


def decode_json(body: bytes) -> Any:
    """Decode a request body (runtime.mcp.jsonrpc.decode_body: duplicate members refused)."""
    return decode_body(body)


def _with_cursor(body: dict[str, Any], next_cursor: str | None) -> dict[str, Any]:
    if next_cursor is not None:
        body["nextCursor"] = next_cursor
    return body


def _fault_reply(fault: JsonRpcFault, request_id: RequestId | None) -> HttpReply:
    return HttpReply(fault.http_status, fault.to_response(request_id), dict(fault.headers))


__all__ = ["SUPPORTED_VERSIONS", "HttpReply", "McpServer"]
