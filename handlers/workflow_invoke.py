"""Handler of workflow_invoke."""

from __future__ import annotations

from typing import Any

from generated.models import WorkflowInvokeInput
from runtime.invocation import invoke_tool
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowInvokeInput, call: ToolCall) -> dict[str, Any]:
    """Admit the call against the Tool's active revision and wait for its result."""
    services = call.services
    return await invoke_tool(services.database, call.context, call.arguments, services.keyring)
