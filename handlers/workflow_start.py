"""Handler of workflow_start."""

from __future__ import annotations

from typing import Any

from generated.models import WorkflowStartInput
from runtime.invocation import start_workflow
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowStartInput, call: ToolCall) -> dict[str, Any]:
    """Start the saved head of a definition and return the receipt at once."""
    services = call.services
    return await start_workflow(services.database, call.context, call.arguments, services.keyring)
