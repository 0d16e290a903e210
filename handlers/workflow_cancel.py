"""Handler of workflow_cancel."""

from __future__ import annotations

from generated.models import WorkflowCancelInput, WorkflowCancelOutput
from runtime.invocation import cancel
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowCancelInput, call: ToolCall) -> WorkflowCancelOutput:
    """Cancel one of the caller's runs as its cancellation policy allows."""
    return await cancel(call.services.database, call.context, args.workflow_instance_id)
