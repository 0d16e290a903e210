"""tools/list paging: opaque cursors bound to the exact list they page through."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from runtime.mcp.jsonrpc import INVALID_PARAMS, JsonRpcFault

Item = TypeVar("Item")


class Pages(Generic[Item]):
    """Pages of a fixed list; a cursor from another list (another build, a reload, another
    caller's roles) is refused, not misread."""

    def __init__(self, items: Sequence[Item], names: Sequence[str]) -> None:
        self._items = items
        self._tag = hashlib.sha256(",".join(names).encode()).hexdigest()[:16]

    def page(self, cursor: Any, size: int) -> tuple[Sequence[Item], str | None]:
        """One page from an opaque cursor, and the cursor of the next page."""
        offset = 0 if cursor is None else self._offset(cursor)
        chunk = self._items[offset : offset + size]
        end = offset + len(chunk)
        return chunk, (self._cursor(end) if end < len(self._items) else None)

    def _cursor(self, offset: int) -> str:
        raw = json.dumps({"o": offset, "t": self._tag}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def _offset(self, cursor: Any) -> int:
        invalid = JsonRpcFault(INVALID_PARAMS, "invalid or expired cursor")
        if not isinstance(cursor, str) or len(cursor) > 200:
            raise invalid
        try:
            padded = cursor + "=" * (-len(cursor) % 4)
            decoded = json.loads(base64.urlsafe_b64decode(padded.encode()))
        except (ValueError, UnicodeDecodeError):
            raise invalid from None
        if not isinstance(decoded, dict) or decoded.get("t") != self._tag:
            raise invalid
        offset = decoded.get("o")
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise invalid
        if not 0 < offset < len(self._items):
            raise invalid
        return offset
