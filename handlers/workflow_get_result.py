"""Handler of workflow_get_result."""

from __future__ import annotations

from typing import Any

from generated.models import WorkflowGetResultInput
from runtime.invocation import get_result
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowGetResultInput, call: ToolCall) -> dict[str, Any]:
    """The output of one of the caller's runs, its live state, or its stored error."""
    return await get_result(call.services.database, call.context, args.workflow_instance_id)
