"""The served tool list: generated routes that have a hand-written handler, in catalog order."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from generated.routes import ToolRoute
from generated.tools import ToolName
from runtime.mcp.paging import Pages

__all__ = ["ServedTool", "ToolRegistry", "ToolRoute"]

META_PREFIX = "io.lightapi.workflow/"

Handler = Callable[[Any, Any], Awaitable[Any]]
# refuse(failure, call): a handler's own answer to arguments the catalog validator refused.
Refusal = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class ServedTool:
    """A route together with its handler."""

    route: ToolRoute
    handle: Handler
    refuse: Refusal | None = None

    @property
    def is_publication(self) -> bool:
        """Whether the tool is one of the publisher-authenticated tools carrying hostId."""
        return bool(self.route.publisher_token)

    def describe(self) -> dict[str, Any]:
        """The MCP Tool object for tools/list."""
        route = self.route
        return {
            "name": route.name,
            "title": route.title,
            "description": route.description,
            "inputSchema": dict(route.input_schema),
            "outputSchema": dict(route.output_schema),
            "annotations": dict(route.annotations),
            "_meta": {
                f"{META_PREFIX}permission": route.permission,
                f"{META_PREFIX}sideEffect": route.side_effect,
                f"{META_PREFIX}gatewayPublication": route.gateway_publication,
                f"{META_PREFIX}identitySource": route.identity_source,
                f"{META_PREFIX}publisherToken": route.publisher_token,
            },
        }


def _load_handler(module_name: str) -> tuple[Handler, Refusal | None] | None:
    if importlib.util.find_spec(module_name) is None:
        return None
    module = importlib.import_module(module_name)
    handle = getattr(module, "handle", None)
    refuse = getattr(module, "refuse", None)
    if not callable(handle):
        return None
    return handle, refuse if callable(refuse) else None


class ToolRegistry:
    """The tools this process serves; a route without a handler is not served at all."""

    def __init__(self, routes: Mapping[ToolName, ToolRoute]) -> None:
        served: list[ServedTool] = []
        for route in routes.values():
            loaded = _load_handler(route.handler_module)
            if loaded is not None:
                served.append(ServedTool(route, *loaded))
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
