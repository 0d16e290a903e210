"""The task shapes of both revisions: Task objects, DetailedTask, elicitation requests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime import mcp_tasks
from runtime.canonical import timestamp
from runtime.invocation import MAX_WAIT_MS
from runtime.mcp.dispatch import ToolOutcome
from runtime.mcp.jsonrpc import MISSING_CLIENT_CAPABILITY, JsonRpcFault
from runtime.mcp.protocol import LEGACY_VERSION, MODERN_VERSION

EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK_KEY = "io.modelcontextprotocol/related-task"
# The tools a task may follow: a started run outlives the call that starts it.
TASK_TOOLS = frozenset({"workflow_start"})
POLL_INTERVAL_MS = 2_000
# A run lives at most 30 days (its deadline); its task a week longer, to read the result.
DEFAULT_TTL_MS = 37 * 86_400_000
MIN_TTL_MS = 1_000
LIST_PAGE_SIZE = 50
# tasks/result (2025-11-25) waits at most this long for the run to end.
RESULT_WAIT_MS = MAX_WAIT_MS
MODERN_TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
LEGACY_TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
_TERMINAL = frozenset({"completed", "failed", "cancelled"})


def missing_capability() -> JsonRpcFault:
    """-32021: a tasks/* call from a client that did not declare the extension on it."""
    return JsonRpcFault(
        MISSING_CLIENT_CAPABILITY,
        "Missing required client capability",
        data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def declares_extension(capabilities: Mapping[str, Any]) -> bool:
    """Whether a request's client capabilities declare the tasks extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION), dict)


@dataclass(frozen=True)
class TaskState:
    """What a task is now: its row, status, message, last update, input requests and result."""

    row: mcp_tasks.TaskRow
    status: str
    updated_at: str
    message: str | None = None
    input_requests: dict[str, Any] | None = None
    result: ToolOutcome | None = None

    @property
    def terminal(self) -> bool:
        """completed, failed or cancelled."""
        return self.status in _TERMINAL


def created_at(row: mcp_tasks.TaskRow) -> str:
    """A task's createdAt."""
    return timestamp(row.created_ts)


def elicitation(task: Mapping[str, Any]) -> dict[str, Any]:
    """The elicitation/create form request of an open ask: its options as an enum (approval) or
    free text (input), and an optional comment, as workflow_task_complete accepts them."""
    value: dict[str, Any] = {"type": "string", "title": "Answer"}
    options = task.get("options") or []
    if options:
        value["oneOf"] = [
            {"const": str(option["value"]), "title": str(option["label"])} for option in options
        ]
    else:
        value.update(minLength=1, maxLength=4096)
    properties = {
        "value": value,
        "comment": {"type": "string", "title": "Comment", "minLength": 1, "maxLength": 2000},
    }
    required = ["value"] if task.get("required", True) else []
    return form_request(str(task["prompt"]), properties, required)


@dataclass(frozen=True)
class InputRound:
    """A 2026-07-28 tools/call's MRTR round (SEP-2322): what it answers, what it may be asked.

    responses: the request's inputResponses (None on a first round); elicitation: whether the
    client declared the elicitation capability on the request.
    """

    responses: Any
    elicitation: bool


@dataclass(frozen=True)
class InputRequired:
    """An InputRequiredResult: requests the client answers before the call goes on."""

    requests: dict[str, Any]


def form_request(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An elicitation/create form request (a flat object of primitive fields)."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def task_object(state: TaskState, era: str) -> dict[str, Any]:
    """The Task of a revision (for tasks/get, CreateTaskResult, tasks/list, tasks/cancel)."""
    row = state.row
    task: dict[str, Any] = {"taskId": row.task_id, "status": state.status}
    if state.message is not None:
        task["statusMessage"] = state.message
    task["createdAt"] = created_at(row)
    task["lastUpdatedAt"] = state.updated_at
    if era == LEGACY_VERSION:
        task["ttl"] = row.ttl_ms
        task["pollInterval"] = POLL_INTERVAL_MS
    else:
        task["ttlMs"] = row.ttl_ms
        task["pollIntervalMs"] = POLL_INTERVAL_MS
    return task


def detailed_task(state: TaskState) -> dict[str, Any]:
    """The extension's DetailedTask: the Task with its inputRequests, result or error."""
    task = task_object(state, MODERN_VERSION)
    if state.status == "input_required" and state.input_requests is not None:
        task["inputRequests"] = state.input_requests
    elif state.status == "completed" and state.result is not None:
        # What tools/call answers in this revision: a CallToolResult with its resultType.
        task["result"] = {"resultType": "complete", **state.result.to_call_result()}
    return task
