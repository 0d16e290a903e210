"""What the MCP server needs from a tool source: pages of tools/list and tools/call outcomes.

The service serves its own route table (ToolRegistry, ToolDispatcher); the reference Gateway
serves its snapshot and relays through the same protocol code with its own implementations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runtime.mcp.dispatch import ToolOutcome
    from runtime.mcp.tasks.shapes import InputRequired, InputRound


class ToolPages(Protocol):
    """tools/list: one page of Tool objects from an opaque cursor, and the next cursor."""

    def page(self, cursor: Any, size: int) -> tuple[list[dict[str, Any]], str | None]:
        """One page and the cursor of the next (None on the last page)."""
        ...


class ToolCalls(Protocol):
    """tools/call: protocol faults raise JsonRpcFault, refusals return isError outcomes."""

    async def call(self, name: Any, arguments: Any, headers: Mapping[str, str]) -> ToolOutcome:
        """Run one call; headers are keyed by lower-case name."""
        ...


class TaskCalls(Protocol):
    """MCP tasks (issue 35): task-augmented tools/call and the tasks/* methods of both eras.

    The service answers from its own store (runtime.mcp.tasks.TaskService); the reference
    Gateway relays both to Workflow (gateway.tasks).
    """

    def task_support(self, name: str) -> str | None:
        """A tool's execution.taskSupport ("optional" or "required"), None for a sync tool."""
        ...

    async def start(
        self,
        name: Any,
        arguments: Any,
        headers: Mapping[str, str],
        era: str,
        ttl_ms: Any = None,
        rounds: InputRound | None = None,
    ) -> ToolOutcome | dict[str, Any] | InputRequired:
        """A task's Task object (of era), the tool's own outcome when no task was made, or
        (2026-07-28, rounds given) the input the client must give before the start."""
        ...

    async def answer(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str], era: str
    ) -> dict[str, Any]:
        """The result body of one tasks/* method (without the modern resultType and _meta)."""
        ...
