"""The console's tool calls: the MCP dispatcher's own route checks, roles and handlers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.mcp.dispatch import ToolDispatcher
from runtime.security import InvocationContext


@dataclass(frozen=True)
class Answer:
    """A tool's answer: its structured output, or its error's code and message."""

    data: dict[str, Any]
    code: str | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        """True when the tool succeeded."""
        return self.code is None


@dataclass(frozen=True)
class Calls:
    """Tool calls as one signed-in caller: no second path, no wider view than MCP gives them."""

    dispatcher: ToolDispatcher
    context: InvocationContext

    async def __call__(self, tool: str, arguments: dict[str, Any]) -> Answer:
        """Run tool with arguments as the caller (the same code as tools/call)."""
        outcome = await self.dispatcher.call_as(tool, arguments, self.context)
        if not outcome.is_error:
            return Answer(outcome.structured)
        error = outcome.structured.get("error") or {}
        return Answer(
            outcome.structured,
            str(error.get("code", "WORKFLOW_INVOCATION_UNAVAILABLE")),
            str(error.get("message", "the call failed")),
        )
