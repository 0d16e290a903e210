"""What a handler receives besides its typed input."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.errors import WorkflowError, input_invalid

if TYPE_CHECKING:
    from runtime.collaborators import Services
    from runtime.security import InvocationContext


@dataclass(frozen=True)
class ToolCall:
    """One authenticated, validated tool call: its name, caller, arguments and services."""

    tool_name: str
    context: InvocationContext
    services: Services
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class InputFailure:
    """Why the catalog validator refused a call's arguments: the failing keyword and path.

    A handler module may define `refuse(failure, call)` for the few contract rules that must
    classify such a refusal (binding publish evidence); without it the call gets error().
    """

    message: str
    name: str | None  # the failing location as reported, e.g. "data.dependencies[0].x"
    path: tuple[str, ...]  # the same split, e.g. ("data", "dependencies", "0", "x")
    rule: str | None  # the JSON Schema keyword, e.g. "pattern"
    # Every problem found, {pointer, rule, message}, the validator's own first ("" none found).
    problems: tuple[dict[str, str], ...] = field(default=())

    def details(self) -> dict[str, Any] | None:
        """The refusal details: the first failure's path and keyword, and every problem."""
        validation: dict[str, Any] = {}
        if self.name is not None:
            validation["path"] = self.name
        if self.rule is not None:
            validation["rule"] = self.rule
        details: dict[str, Any] = {"validation": validation} if validation else {}
        if self.problems:
            details["problems"] = list(self.problems)
        return details or None

    def error(self) -> WorkflowError:
        """The plain WORKFLOW_INPUT_INVALID refusal, naming the path, keyword and problems."""
        return input_invalid(self.message, self.details())


# handle(args, call): args is the route's generated input struct; the result its output struct.
Handle = Callable[[Any, ToolCall], Awaitable[Any]]
# refuse(failure, call): a handler's own answer to arguments the catalog validator refused.
Refuse = Callable[[InputFailure, ToolCall], Awaitable[Any]]


@dataclass(frozen=True)
class ToolHandler:
    """The hand-written code of one tool: its handle, and refuse where a contract rule needs one.

    The table of them is handlers.HANDLERS; the composition hands it to the app.
    """

    handle: Handle
    refuse: Refuse | None = None
