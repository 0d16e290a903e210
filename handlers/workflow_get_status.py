"""Handler of workflow_get_status."""

from __future__ import annotations

from generated.models import WorkflowGetStatusInput, WorkflowGetStatusOutput
from runtime.invocation import get_status
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowGetStatusInput, call: ToolCall) -> WorkflowGetStatusOutput:
    """The state of one of the caller's runs."""
    services = call.services
    return await get_status(
        services.database, call.context, args.workflow_instance_id, services.settings.security
    )
