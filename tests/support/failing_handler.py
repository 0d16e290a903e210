"""A test-only handler with a defect: it raises an unexpected exception quoting SQL."""

from __future__ import annotations

from typing import Any

from runtime.mcp.call import ToolCall


async def handle(args: Any, call: ToolCall) -> dict[str, Any]:
    """Fail like a bug would."""
    raise RuntimeError("SELECT secret_column FROM hidden_table WHERE token = 'abc'")
