"""A test-only handler: echoes the verified caller, for routes that are not publication tools."""

from __future__ import annotations

from typing import Any

from runtime.mcp.call import ToolCall


async def handle(args: Any, call: ToolCall) -> dict[str, Any]:
    """Return who called."""
    return {"hostId": call.context.host_id, "userId": call.context.user_id}
