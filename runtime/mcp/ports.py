"""What the MCP server needs from a tool source: pages of tools/list and tools/call outcomes.

The service serves its own route table (ToolRegistry, ToolDispatcher); the reference Gateway
serves its snapshot and relays through the same protocol code with its own implementations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runtime.mcp.dispatch import ToolOutcome


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

    async def start(
        self, name: Any, arguments: Any, headers: Mapping[str, str], era: str, ttl_ms: Any = None
    ) -> ToolOutcome | dict[str, Any]:
        """A task's Task object (of era), or the tool's own outcome when no task was made."""
        ...

    async def answer(
        self, method: str, params: dict[str, Any], headers: Mapping[str, str], era: str
    ) -> dict[str, Any]:
        """The result body of one tasks/* method (without the modern resultType and _meta)."""
        ...
