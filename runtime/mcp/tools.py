"""The served tool list: generated routes that have a hand-written handler, in catalog order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from generated.routes import DECLARED_ERROR_RESULT_SCHEMA, ToolRoute
from generated.tools import ToolName
from runtime.mcp.call import ToolHandler
from runtime.mcp.paging import Pages

__all__ = ["ServedTool", "ToolRegistry", "ToolRoute", "declared_output_schema", "describe_tool"]

META_PREFIX = "io.lightapi.workflow/"


def declared_output_schema(success_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The outputSchema a Tool declares: its success output or the error envelope.

    A refusal's structuredContent is seed 000's error envelope, which MCP clients check against
    the declared schema like any other; ToolRoute.declared_output_schema is the same rule.
    """
    return {
        "type": "object",
        "anyOf": [dict(success_schema), dict(DECLARED_ERROR_RESULT_SCHEMA)],
    }


def describe_tool(route: ToolRoute) -> dict[str, Any]:
    """The MCP Tool object of a route, as tools/list shows it."""
    return {
        "name": route.name,
        "title": route.title,
        "description": route.description,
        "inputSchema": dict(route.input_schema),
        "outputSchema": route.declared_output_schema,
        "annotations": dict(route.annotations),
        "_meta": {
            f"{META_PREFIX}permission": route.permission,
            f"{META_PREFIX}sideEffect": route.side_effect,
            f"{META_PREFIX}gatewayPublication": route.gateway_publication,
            f"{META_PREFIX}identitySource": route.identity_source,
            f"{META_PREFIX}publisherToken": route.publisher_token,
        },
    }


@dataclass(frozen=True)
class ServedTool:
    """A route together with its handler."""

    route: ToolRoute
    handler: ToolHandler

    @property
    def is_publication(self) -> bool:
        """Whether the tool is one of the publisher-authenticated tools carrying hostId."""
        return bool(self.route.publisher_token)

    def describe(self) -> dict[str, Any]:
        """The MCP Tool object for tools/list."""
        return describe_tool(self.route)


class ToolRegistry:
    """The tools this process serves: each route that has an entry in the handler table."""

    def __init__(
        self, routes: Mapping[ToolName, ToolRoute], handlers: Mapping[ToolName, ToolHandler]
    ) -> None:
        served = [
            ServedTool(route, handlers[name]) for name, route in routes.items() if name in handlers
        ]
        self._tools: Sequence[ServedTool] = tuple(served)
        self._by_name: dict[str, ServedTool] = {tool.route.name: tool for tool in served}
        self._pages = Pages(self._tools, [tool.route.name for tool in served])

    def get(self, name: str) -> ServedTool | None:
        """The served tool of that name, if any."""
        return self._by_name.get(name)

    @property
    def names(self) -> list[str]:
        """Served tool names in catalog order."""
        return [tool.route.name for tool in self._tools]

    def page(self, cursor: Any, size: int) -> tuple[list[dict[str, Any]], str | None]:
        """One page of tools/list from an opaque cursor, and the cursor of the next page."""
        chunk, next_cursor = self._pages.page(cursor, size)
        return [tool.describe() for tool in chunk], next_cursor
