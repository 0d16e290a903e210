"""Handler of workflow_get_result."""

from __future__ import annotations

from generated.models import WorkflowGetResultInput, WorkflowGetResultOutput
from runtime.invocation import get_result
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowGetResultInput, call: ToolCall) -> WorkflowGetResultOutput:
    """The output, live state or stored error of one of the caller's runs."""
    services = call.services
    return await get_result(
        services.database, call.context, args.workflow_instance_id, services.settings.security
    )
