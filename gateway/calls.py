"""tools/call at the Gateway: verify the caller, then a routed Tool, a start route (plain, without
a task), a relayed tool or a refusal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.acl import RelayAcl, is_internal, refuse_internal
from gateway.caller import Caller, RequestCaller
from gateway.relay import WorkflowClient, WorkflowUnreachable
from gateway.results import passed_through, with_error_meta
from gateway.routed import ACTION_HEADER, PreparedTool, call_routed, unreachable
from gateway.starts import PreparedStart, check_input, check_roles, start_arguments
from runtime.errors import AuthenticationError, WorkflowError, policy_denied
from runtime.mcp import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    JsonRpcFault,
    RepeatedMembers,
    ToolOutcome,
    error_outcome,
    repeated_members_refusal,
    unauthenticated,
)
from runtime.telemetry import caller as bind_caller
from runtime.telemetry import tool_call

UNKNOWN = "unknown"


class GatewayCalls:
    """The tools/call side of one request, against the snapshot current when it arrived."""

    def __init__(
        self,
        tools: Mapping[str, PreparedTool],
        caller: RequestCaller,
        acl: RelayAcl,
        client: WorkflowClient,
        relay_timeout_s: float,
        starts: Mapping[str, PreparedStart] | None = None,
    ) -> None:
        self._tools = tools
        self._starts = starts or {}
        self._caller = caller
        self._acl = acl
        self._client = client
        self._relay_timeout_s = relay_timeout_s

    def _label(self, name: Any) -> str:
        # Only served names become metric labels: anything else is one bounded "unknown".
        known = isinstance(name, str) and (
            name in self._tools or name in self._starts or self._acl.is_relayed(name)
        )
        return name if known and isinstance(name, str) else UNKNOWN

    async def call(self, name: Any, arguments: Any, headers: Mapping[str, str]) -> ToolOutcome:
        """One tools/call: 401 faults for the caller's bearers, isError results otherwise."""
        with tool_call(self._label(name), headers) as observed:
            try:
                outcome = await self._call(name, arguments, headers)
            except JsonRpcFault as fault:
                observed.code = f"jsonrpc:{fault.code}"
                raise
            observed.code = _code_of(outcome)
            return outcome

    async def _call(self, name: Any, arguments: Any, headers: Mapping[str, str]) -> ToolOutcome:
        try:
            caller = self._caller.get()
        except AuthenticationError as failure:
            raise unauthenticated(failure.message, headers) from None
        if caller.host_id is not None:
            bind_caller(caller.host_id)
        if isinstance(arguments, RepeatedMembers) and isinstance(name, str):
            # A readable call whose input names a member twice: its tool's bad input.
            return error_outcome(repeated_members_refusal(arguments))
        if arguments is None:
            arguments = {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise JsonRpcFault(INVALID_PARAMS, "tools/call needs a tool name and object arguments")
        routed = self._tools.get(name)
        try:
            if routed is not None:
                action = headers.get(ACTION_HEADER)
                outcome = await call_routed(self._client, routed, caller, arguments, action)
                return with_error_meta(outcome)
            if (start := self._starts.get(name)) is not None:
                return await self._start(start, caller, arguments)
            if is_internal(name):
                raise refuse_internal()
            if self._acl.is_relayed(name):
                return await self._relay(name, caller, arguments)
            raise policy_denied(f"unknown tool {name[:128]!r}")
        except WorkflowError as error:
            outcome = error_outcome(error)
            return with_error_meta(outcome) if routed is not None else outcome

    async def _relay(self, name: str, caller: Caller, arguments: dict[str, Any]) -> ToolOutcome:
        self._acl.check(caller, name)
        try:
            result = await self._client.call_tool(
                name, arguments, caller, timeout_s=self._relay_timeout_s
            )
        except WorkflowUnreachable as failure:
            raise unreachable(str(failure)) from None
        return passed_through(result)

    async def _start(
        self, prepared: PreparedStart, caller: Caller, arguments: dict[str, Any]
    ) -> ToolOutcome:
        """A start route called without a task: a plain workflow_start, answered as it answers.

        A required route gets here only from a 2025-11-25 call without params.task (McpServer
        answers -32021 in 2026-07-28), which that revision refuses as -32601.
        """
        route = prepared.route
        if route.task_support == "required":
            raise JsonRpcFault(
                METHOD_NOT_FOUND,
                f"{route.name} runs only as a task: call it with params.task "
                "(its execution.taskSupport is required)",
            )
        check_roles(route, caller)
        check_input(prepared, arguments)
        relayed = start_arguments(prepared.route, arguments)
        try:
            result = await self._client.call_tool(
                "workflow_start", relayed, caller, timeout_s=self._relay_timeout_s
            )
        except WorkflowUnreachable as failure:
            raise unreachable(str(failure)) from None
        return passed_through(result)


def _code_of(outcome: ToolOutcome) -> str:
    if not outcome.is_error:
        return "ok"
    error = outcome.structured.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else "error"
