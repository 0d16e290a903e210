"""tools/list pages of one caller's Tools, with a cursor bound to that exact list."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from runtime.mcp.jsonrpc import INVALID_PARAMS, JsonRpcFault


class CallerTools:
    """The Tools one caller may see, paged like the service's registry."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self._tools = tools
        names = ",".join(str(tool["name"]) for tool in tools)
        # A cursor from another list (a reload, another caller's roles) is refused, not misread.
        self._tag = hashlib.sha256(names.encode()).hexdigest()[:16]

    def page(self, cursor: Any, size: int) -> tuple[list[dict[str, Any]], str | None]:
        """One page from an opaque cursor, and the cursor of the next page."""
        offset = 0 if cursor is None else self._offset(cursor)
        chunk = self._tools[offset : offset + size]
        end = offset + len(chunk)
        return chunk, (self._cursor(end) if end < len(self._tools) else None)

    def _cursor(self, offset: int) -> str:
        raw = json.dumps({"o": offset, "t": self._tag}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def _offset(self, cursor: Any) -> int:
        invalid = JsonRpcFault(INVALID_PARAMS, "invalid or expired cursor")
        if not isinstance(cursor, str) or len(cursor) > 200:
            raise invalid
        try:
            decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        except (ValueError, UnicodeDecodeError):
            raise invalid from None
        if not isinstance(decoded, dict) or decoded.get("t") != self._tag:
            raise invalid
        offset = decoded.get("o")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise invalid
        if not 0 < offset < len(self._tools):
            raise invalid
        return offset
