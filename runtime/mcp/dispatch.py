"""tools/call dispatch: authenticate, check host and roles, validate, run the handler."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from fastjsonschema import JsonSchemaValueException

from runtime.collaborators import Services
from runtime.errors import AuthenticationError, WorkflowError, input_invalid
from runtime.mcp.bearer_gate import unauthenticated
from runtime.mcp.call import InputFailure, ToolCall
from runtime.mcp.jsonrpc import INVALID_PARAMS, JsonRpcFault, RepeatedMembers
from runtime.mcp.schema_problems import SchemaProblem, collect, pointer_of
from runtime.mcp.tools import ServedTool, ToolRegistry, ToolRoute
from runtime.security import InvocationContext, authorize_roles, check_host_assertion
from runtime.store import StoreUnavailable
from runtime.telemetry import caller, tool_call

log = logging.getLogger("workflow.mcp")

SCOPE_TOKEN_HEADER = "x-scope-token"
_SCHEMA_MISMATCH = "arguments do not match the input schema"
_PREFIX = "invalid arguments: "


@dataclass(frozen=True)
class ToolOutcome:
    """A tool result: the structured content, whether it is an error, and its text."""

    structured: dict[str, Any]
    is_error: bool
    text: str

    def to_call_result(self) -> dict[str, Any]:
        """The MCP CallToolResult body (without era-specific fields)."""
        return {
            "content": [{"type": "text", "text": self.text}],
            "structuredContent": self.structured,
            "isError": self.is_error,
        }


def error_outcome(error: WorkflowError) -> ToolOutcome:
    """The isError result of a typed workflow error."""
    return ToolOutcome(error.to_structured(), True, error.text())


def with_correlation(outcome: ToolOutcome, correlation: str | None) -> ToolOutcome:
    """An error result naming the call's correlation id (its trace id) in error.details.

    Seed 001: the envelope carries the id an operator finds the call's logs and trace by.
    Publication tools are left as they are: their refusals replay byte for byte by operationId.
    """
    if not outcome.is_error or correlation is None:
        return outcome
    error = outcome.structured["error"]
    details = {**(error.get("details") or {}), "correlationId": correlation}
    structured = {**outcome.structured, "error": {**error, "details": details}}
    return ToolOutcome(structured, True, outcome.text)


def repeated_members_refusal(arguments: RepeatedMembers) -> WorkflowError:
    """The invalid-input refusal of arguments in which an object names a member twice."""
    where = arguments.pointer or "the arguments"
    return input_invalid(
        f"{_PREFIX}an object names the same member twice (at {where}); send each member once",
        {"reason": "duplicate-key", "pointer": arguments.pointer},
    )


def _compact_json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


class ToolDispatcher:
    """Runs one tools/call (or POST /tools/{name}) through the served route table."""

    def __init__(self, registry: ToolRegistry, services: Services) -> None:
        self.registry = registry
        self.services = services

    async def call(self, name: Any, arguments: Any, headers: Mapping[str, str]) -> ToolOutcome:
        """Dispatch one call; protocol faults raise JsonRpcFault, refusals return isError."""
        tool = self.registry.get(name) if isinstance(name, str) else None
        # Served names only as metric labels: any other name is one bounded "unknown".
        with tool_call(tool.route.name if tool is not None else "unknown", headers) as observed:
            try:
                outcome = await self._call(tool, arguments, headers)
            except JsonRpcFault as fault:
                observed.code = f"jsonrpc:{fault.code}"
                raise
            observed.code = _outcome_code(outcome)
            if tool is not None and not tool.is_publication:
                outcome = with_correlation(outcome, observed.correlation_id)
            return outcome

    async def call_as(
        self, name: str, arguments: dict[str, Any], context: InvocationContext
    ) -> ToolOutcome:
        """One call by a caller already authenticated (the console's session): the same host
        assertion, role check, validation, handler and output check as tools/call."""
        tool = self.registry.get(name)
        with tool_call(tool.route.name if tool is not None else "unknown", {}) as observed:
            if tool is None:
                raise JsonRpcFault(INVALID_PARAMS, "unknown tool")
            try:
                outcome = await self._run(tool, context, arguments)
            except WorkflowError as error:
                outcome = error_outcome(error)
            except StoreUnavailable:
                outcome = error_outcome(
                    WorkflowError(
                        "WORKFLOW_INVOCATION_UNAVAILABLE", "the workflow store is unavailable"
                    )
                )
            observed.code = _outcome_code(outcome)
            return outcome

    async def _call(
        self, tool: ServedTool | None, arguments: Any, headers: Mapping[str, str]
    ) -> ToolOutcome:
        if tool is None:
            raise JsonRpcFault(INVALID_PARAMS, "unknown tool")
        if isinstance(arguments, RepeatedMembers):
            return self._refuse_repeated(tool, arguments, headers)
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise JsonRpcFault(INVALID_PARAMS, "tool arguments must be an object")
        try:
            context = self._authenticate(tool, headers)
            return await self._run(tool, context, arguments)
        except WorkflowError as error:
            return error_outcome(error)
        except StoreUnavailable:
            return error_outcome(
                WorkflowError(
                    "WORKFLOW_INVOCATION_UNAVAILABLE", "the workflow store is unavailable"
                )
            )

    def _refuse_repeated(
        self, tool: ServedTool, arguments: RepeatedMembers, headers: Mapping[str, str]
    ) -> ToolOutcome:
        """Arguments naming a member twice: authenticated like any call, then invalid input."""
        try:
            context = self._authenticate(tool, headers)
            authorize_roles(context, tool.route.name, self.services.settings.security)
            raise repeated_members_refusal(arguments)
        except WorkflowError as error:
            return error_outcome(error)

    def _authenticate(self, tool: ServedTool, headers: Mapping[str, str]) -> InvocationContext:
        try:
            return self.services.authenticator.authenticate(
                headers.get("authorization"), headers.get(SCOPE_TOKEN_HEADER)
            )
        except AuthenticationError as failure:
            if tool.is_publication:
                # Seed 000: publication tools answer a missing or invalid token with isError.
                raise WorkflowError(
                    "WORKFLOW_POLICY_DENIED", f"authentication failed: {failure.message}"
                ) from None
            raise unauthenticated(failure.message, headers) from None

    async def _run(
        self, tool: ServedTool, context: InvocationContext, arguments: dict[str, Any]
    ) -> ToolOutcome:
        route = tool.route
        if tool.is_publication:
            asserted_host = arguments.get("hostId")
            if isinstance(asserted_host, str):
                check_host_assertion(context, asserted_host)
        caller(context.host_id)
        authorize_roles(context, route.name, self.services.settings.security)
        _check_storable_identity(context)
        call = ToolCall(route.name, context, self.services, arguments)
        try:
            failure = _schema_failure(route, arguments)
            handler = tool.handler
            if failure is None:
                result = await handler.handle(self._convert_input(tool, arguments), call)
            elif handler.refuse is not None:
                result = await handler.refuse(failure, call)
            else:
                raise failure.error()
        except (WorkflowError, StoreUnavailable):
            raise
        except Exception as exc:
            raise _unexpected(route.name, "failed", exc) from None
        output = msgspec.to_builtins(result)
        self._validate_output(tool, output)
        return ToolOutcome(output, False, _compact_json(output))

    def _convert_input(self, tool: ServedTool, arguments: dict[str, Any]) -> Any:
        route = tool.route
        try:
            # Lax: JSON Schema counts 3.0 as an integer, and the schema check above already passed.
            return msgspec.convert(arguments, route.input_model, strict=False)
        except msgspec.ValidationError as exc:
            raise input_invalid(f"invalid arguments: {exc}") from None

    def _validate_output(self, tool: ServedTool, output: Any) -> None:
        try:
            tool.route.validate_output(output)
        except Exception as exc:
            raise _unexpected(tool.route.name, "produced output outside its schema", exc) from None


# The widest value each identity field's columns hold (user ids 126, subjects and clients 256).
_IDENTITY_LIMITS = (("user id (uid)", 126), ("subject (sub)", 256), ("client id", 256))


def _check_storable_identity(context: InvocationContext) -> None:
    """A verified identity value longer than its columns is a permanent refusal, not a retry."""
    values = (context.user_id, context.subject, context.user_client_id or context.client_id)
    for (field, limit), value in zip(_IDENTITY_LIMITS, values, strict=True):
        if len(value) > limit:
            raise input_invalid(
                f"the user token's {field} is longer than {limit} characters, "
                "the most the workflow store holds",
                details={"field": field, "maximumLength": limit},
            )


def _unexpected(tool_name: str, what: str, exc: Exception) -> WorkflowError:
    """A defect of ours, answered as a retryable isError result with an incident id.

    Seed 000 "Error envelopes": everything but authentication failure is an MCP result. Only
    the exception type is logged: messages may quote SQL, stored data or output values.
    """
    incident = str(uuid.uuid4())
    log.error(
        "tool %s %s: %s (incident %s)",
        tool_name, what, type(exc).__name__, incident, extra={"incident": incident},
    )  # fmt: skip
    return WorkflowError(
        "WORKFLOW_INVOCATION_UNAVAILABLE",
        f"the workflow service could not complete the call (incident {incident})",
        status="failed",
    )


def _schema_failure(route: ToolRoute, arguments: dict[str, Any]) -> InputFailure | None:
    """Run the generated validator, the one structural check; its failure, or None.

    Only on a failure are the other problems collected (schema_problems), so the success path
    costs what it did.
    """
    try:
        route.validate_input(arguments)
    except JsonSchemaValueException as exc:
        # The generated validators name the message, the path and the rule of every refusal.
        message = f"{_PREFIX}{str(exc.message)[:300]}"
        path = tuple(exc.path)
        rule: str = exc.rule
        first = SchemaProblem(pointer_of(path[1:]), rule, message.removeprefix(_PREFIX))
        found = collect(route, arguments, first)
        return InputFailure(
            message=message + found.suffix(),
            name=str(exc.name),
            path=path,
            rule=rule,
            problems=tuple(problem.as_json() for problem in found.listed),
        )
    except Exception:  # what the validator cannot even inspect is still a refusal
        return InputFailure(f"{_PREFIX}{_SCHEMA_MISMATCH}", None, (), None)
    return None


def _outcome_code(outcome: ToolOutcome) -> str:
    """ok, or the error code of an isError result (a bounded label)."""
    if not outcome.is_error:
        return "ok"
    code: str = outcome.structured["error"]["code"]
    return code
