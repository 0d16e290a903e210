"""Task-started routes (issue 35): a tool name given to workflow_start of one definition.

Seed 000 keeps every workflow-backed Tool sync and starts a long-running or human-in-the-loop
process with workflow_start instead; a `starts:` entry of mcp-router.yml names such a start as a
tool of its own, served as an MCP task. A call relays `workflow_start {wfDefId, input:
arguments}` (gateway.tasks: as a task, with the same dual-token rules; gateway.calls: plain).

MRTR input before the task (SEP-2322 composed with SEP-2663: "resolve all MRTR exchanges
synchronously before responding with a CreateTaskResult") is decided here, at the route, and
nowhere else. Only the route has a tool whose top-level arguments are the definition's input:
workflow_start's own arguments are `{wfDefId, input}`, so Workflow could only ask one level
down, for a definition it would first have to load. And a first round never reaches Workflow:
asking costs its start path nothing, per call or otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.caller import Caller
from gateway.router import StartRoute
from runtime.errors import WorkflowError, policy_denied
from runtime.invocation import SchemaCheck, canonical_input, schema_check
from runtime.mcp import INVALID_PARAMS, InputRequired, JsonRpcFault, form_request

# The one inputRequests key of a route's first round. Nothing is stored between rounds: the
# second round names the fields still missing again, and only those are taken from the answer.
INPUT_KEY = "start-input"
_FORM_TYPES = frozenset({"string", "number", "integer", "boolean"})
# What an elicitation form field may carry of a property schema (a restricted JSON Schema).
_FORM_KEYWORDS = (
    "type", "title", "description", "minLength", "maxLength", "format", "minimum", "maximum",
    "enum", "default",
)  # fmt: skip
_FORM_FORMATS = frozenset({"email", "uri", "date", "date-time"})


@dataclass(frozen=True)
class PreparedStart:
    """A start route with its input schema compiled (once per snapshot, not per call)."""

    route: StartRoute
    input_check: SchemaCheck


def prepare_start(route: StartRoute) -> PreparedStart:
    """Compile route's input schema (patterns on RE2); an unusable one refuses every call."""
    return PreparedStart(route, schema_check(route.input_schema, "start route"))


def describe_start(route: StartRoute) -> dict[str, Any]:
    """The MCP Tool object of a start route (McpServer adds 2025-11-25's execution)."""
    return {
        "name": route.name,
        "description": route.description,
        "inputSchema": dict(route.input_schema),
    }


def listed_starts(caller: Caller, routes: tuple[StartRoute, ...]) -> list[dict[str, Any]]:
    """The start routes the caller's roles allow, in snapshot order."""
    return [describe_start(route) for route in routes if caller.holds_any(tuple(route.roles))]


def check_roles(route: StartRoute, caller: Caller) -> None:
    """Refuse with WORKFLOW_POLICY_DENIED unless the caller holds one of the route's roles."""
    if not caller.holds_any(tuple(route.roles)):
        raise policy_denied(f"the caller holds no role allowed to call {route.name}")


def check_input(prepared: PreparedStart, arguments: dict[str, Any]) -> None:
    """Refuse arguments the route's input schema does not accept (WORKFLOW_INPUT_INVALID)."""
    canonical_input(arguments)
    prepared.input_check.check(arguments)


def start_arguments(route: StartRoute, arguments: dict[str, Any]) -> dict[str, Any]:
    """workflow_start's arguments for a call of route (its definition, pinned when set)."""
    relayed: dict[str, Any] = {"wfDefId": route.workflow_definition_id, "input": arguments}
    if route.definition_digest is not None:
        relayed["expectedDefinitionDigest"] = route.definition_digest
    return relayed


def missing_fields(route: StartRoute, arguments: Mapping[str, Any]) -> list[str]:
    """The input schema's required top-level fields the arguments leave out."""
    required = route.input_schema.get("required")
    if not isinstance(required, list):
        return []
    return [name for name in required if isinstance(name, str) and name not in arguments]


def input_request(route: StartRoute, missing: list[str]) -> InputRequired | None:
    """The first round: one elicitation form asking for the missing fields.

    None when a missing field is no primitive a form can ask for (an object, an array): the
    call then gets the input schema's own refusal, naming the field.
    """
    properties = route.input_schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    fields: dict[str, Any] = {}
    for name in missing:
        field = form_field(name, properties.get(name))
        if field is None:
            return None
        fields[name] = field
    message = f"{route.name} needs: {', '.join(missing)}"
    return InputRequired({INPUT_KEY: form_request(message, fields, list(missing))})


def form_field(name: str, schema: Any) -> dict[str, Any] | None:
    """A property schema as an elicitation form field, or None when it is no primitive."""
    if not isinstance(schema, dict):
        return None
    kind, shape, choices = schema.get("type"), schema.get("format"), schema.get("enum", [])
    # A type list (["string", "null"]) or an unknown format is no form field.
    if not isinstance(kind, str) or kind not in _FORM_TYPES:
        return None
    if shape is not None and (not isinstance(shape, str) or shape not in _FORM_FORMATS):
        return None
    if not isinstance(choices, list) or not all(isinstance(value, str) for value in choices):
        return None
    field = {key: schema[key] for key in _FORM_KEYWORDS if key in schema}
    field.setdefault("title", name)
    return field


def answered(route: StartRoute, missing: list[str], responses: Any) -> dict[str, Any] | None:
    """The second round: the missing fields from the accepted answer (None: not answered yet).

    A malformed inputResponses is a protocol error (-32602); a declined or dismissed answer,
    or content naming a field that was not asked for, is the call's typed refusal
    (WORKFLOW_INPUT_INVALID), and nothing is started.
    """
    if responses is None:
        return None
    if not isinstance(responses, dict):
        raise JsonRpcFault(INVALID_PARAMS, "inputResponses must be an object")
    answer = responses.get(INPUT_KEY)
    if answer is None:
        return None  # other keys are not ours: ignored (SEP-2322)
    if not isinstance(answer, dict) or not isinstance(answer.get("action"), str):
        raise JsonRpcFault(
            INVALID_PARAMS, f"inputResponses.{INPUT_KEY} must be an elicitation result"
        )
    action = answer["action"]
    if action != "accept":
        raise WorkflowError(
            "WORKFLOW_INPUT_INVALID",
            f"the input {route.name} asked for ({', '.join(missing)}) was not given "
            f"(action {action[:32]!r}): nothing was started",
        )
    content = answer.get("content", {})
    if not isinstance(content, dict):
        raise JsonRpcFault(INVALID_PARAMS, f"inputResponses.{INPUT_KEY}.content must be an object")
    outside = sorted(key for key in content if key not in missing)
    if outside:
        raise WorkflowError(
            "WORKFLOW_INPUT_INVALID",
            f"the answer to {route.name}'s input request gives fields it did not ask for: "
            f"{', '.join(repr(key[:64]) for key in outside[:5])}; it asked for "
            f"{', '.join(missing)}",
        )
    return {name: content[name] for name in missing if name in content}
