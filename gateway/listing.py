"""tools/list pages of one caller's Tools, with a cursor bound to that exact list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.mcp import Pages


class CallerTools:
    """The Tools one caller may see, paged like the service's registry.

    Built on the first page asked for: a tools/call request never lists.
    """

    def __init__(self, tools: Callable[[], list[dict[str, Any]]]) -> None:
        self._tools = tools
        self._pages: Pages[dict[str, Any]] | None = None

    def page(self, cursor: Any, size: int) -> tuple[list[dict[str, Any]], str | None]:
        """One page from an opaque cursor, and the cursor of the next page."""
        if self._pages is None:
            tools = self._tools()
            self._pages = Pages(tools, [str(tool["name"]) for tool in tools])
        chunk, next_cursor = self._pages.page(cursor, size)
        return list(chunk), next_cursor
