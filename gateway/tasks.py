"""MCP tasks at the Gateway (issue 35 item 3): relayed to Workflow, which holds them.

A task-augmented tools/call of a relayed task tool (workflow_start) goes to Workflow in the
client's own revision, declaring the tasks capability (2026-07-28) or carrying params.task
(2025-11-25), after the same checks as any relayed call: the caller's bearer verified here,
the tool's role list. tasks/* go to Workflow as they came. Every relay carries the user bearer
and the Gateway's application bearer (the dual-token rule); Workflow binds each task to the
user's subject and host, so the Gateway keeps no task state and any Gateway replica serves
any task. A task-started route (gateway.starts) is started the same way: the relay is
`workflow_start` of the route's definition, after the route's roles, its MRTR round
(2026-07-28) and its input schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.acl import RelayAcl
from gateway.caller import Caller, RequestCaller
from gateway.relay import WorkflowClient, WorkflowUnreachable
from gateway.results import passed_through
from gateway.routed import unreachable
from gateway.starts import (
    PreparedStart,
    answered,
    check_input,
    check_roles,
    input_request,
    missing_fields,
    start_arguments,
)
from runtime.errors import AuthenticationError, WorkflowError
from runtime.mcp import (
    INVALID_PARAMS,
    LEGACY_VERSION,
    TASKS_EXTENSION,
    InputRequired,
    InputRound,
    JsonRpcFault,
    ToolOutcome,
    error_outcome,
    unauthenticated,
)

# What the Gateway passes on of a tasks/* request's params (never the client's _meta).
_TASK_PARAMS = ("taskId", "inputResponses", "cursor")
_WORKFLOW_START = "workflow_start"


class GatewayTasks:
    """The task methods of one request, relayed to Workflow."""

    def __init__(
        self,
        caller: RequestCaller,
        acl: RelayAcl,
        client: WorkflowClient,
        timeout_s: float,
        starts: Mapping[str, PreparedStart] | None = None,
    ) -> None:
        self._caller = caller
        self._acl = acl
        self._client = client
        self._timeout_s = timeout_s
        self._starts = starts or {}

    def task_support(self, name: str) -> str | None:
        """A start route's taskSupport; workflow_start's "optional"; None for the rest."""
        prepared = self._starts.get(name)
        if prepared is not None:
            return prepared.route.task_support
        return "optional" if name == _WORKFLOW_START else None

    def _verified(self, headers: Mapping[str, str]) -> Caller:
        try:
            return self._caller.get()
        except AuthenticationError as failure:
            raise unauthenticated(failure.message, headers) from None

    async def start(
        self,
        name: Any,
        arguments: Any,
        headers: Mapping[str, str],
        era: str,
        ttl_ms: Any = None,
        rounds: InputRound | None = None,
    ) -> ToolOutcome | dict[str, Any] | InputRequired:
        """Relay a task-augmented start; Workflow's Task object, or its (or our) refusal."""
        caller = self._verified(headers)
        prepared = self._starts.get(name) if isinstance(name, str) else None
        if prepared is not None:
            return await self._start_route(prepared, arguments, caller, era, ttl_ms, rounds)
        try:
            if not self._acl.is_relayed(name):
                raise WorkflowError("WORKFLOW_POLICY_DENIED", f"unknown tool {str(name)[:128]!r}")
            self._acl.check(caller, name)
        except WorkflowError as error:
            return error_outcome(error)
        return await self._start(name, arguments, caller, era, ttl_ms)

    async def _start_route(
        self,
        prepared: PreparedStart,
        arguments: Any,
        caller: Caller,
        era: str,
        ttl_ms: Any,
        rounds: InputRound | None,
    ) -> ToolOutcome | dict[str, Any] | InputRequired:
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise JsonRpcFault(INVALID_PARAMS, "tools/call needs object arguments")
        try:
            check_roles(prepared.route, caller)
            if rounds is not None and rounds.elicitation:
                asked = _round(prepared, arguments, rounds)
                if isinstance(asked, InputRequired):
                    return asked
                arguments = asked
            check_input(prepared, arguments)
        except WorkflowError as error:
            return error_outcome(error)
        relayed = start_arguments(prepared.route, arguments)
        return await self._start(_WORKFLOW_START, relayed, caller, era, ttl_ms)

    async def _start(
        self, name: str, arguments: Any, caller: Caller, era: str, ttl_ms: Any
    ) -> ToolOutcome | dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if era == LEGACY_VERSION:
            params["task"] = {} if ttl_ms is None else {"ttl": ttl_ms}
        result = await self._relay(era, "tools/call", params, caller)
        if isinstance(result, ToolOutcome):
            return result
        if era == LEGACY_VERSION and isinstance(result.get("task"), dict):
            task: dict[str, Any] = result["task"]
            return task
        if result.get("resultType") == "task":
            return _body(result)
        return passed_through(result)

    async def answer(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str], era: str
    ) -> dict[str, Any]:
        """Relay one tasks/* method; Workflow's answer (its faults are raised as they came)."""
        caller = self._verified(headers)
        relayed = {key: params[key] for key in _TASK_PARAMS if key in params}
        result = await self._relay(era, method, relayed, caller)
        if isinstance(result, ToolOutcome):
            # A transport failure on a task method is a protocol-level internal error.
            raise JsonRpcFault(-32603, result.text)
        return _body(result)

    async def _relay(
        self, era: str, method: str, params: dict[str, Any], caller: Caller
    ) -> dict[str, Any] | ToolOutcome:
        capabilities: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
        try:
            return await self._client.request(
                era, method, params, caller, timeout_s=self._timeout_s, capabilities=capabilities
            )
        except WorkflowUnreachable as failure:
            return error_outcome(unreachable(str(failure)))


def _round(
    prepared: PreparedStart, arguments: dict[str, Any], rounds: InputRound
) -> dict[str, Any] | InputRequired:
    """The MRTR round of a call missing required fields: ask, or merge the answer."""
    route = prepared.route
    missing = missing_fields(route, arguments)
    asked = input_request(route, missing) if missing else None
    if asked is None:
        return arguments
    filled = answered(route, missing, rounds.responses)
    if filled is None:
        return asked
    return {**arguments, **filled}


def _body(result: Mapping[str, Any]) -> dict[str, Any]:
    """Workflow's result without its envelope fields (the Gateway's server adds its own)."""
    return {key: value for key, value in result.items() if key not in ("resultType", "_meta")}
