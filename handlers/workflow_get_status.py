"""Handler of workflow_get_status."""

from __future__ import annotations

from typing import Any

from generated.models import WorkflowGetStatusInput
from runtime.invocation import get_status
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowGetStatusInput, call: ToolCall) -> dict[str, Any]:
    """The state of one of the caller's runs."""
    return await get_status(call.services.database, call.context, args.workflow_instance_id)
