"""Handler of workflow_task_get."""

from __future__ import annotations

from generated.models import WorkflowTaskGetInput, WorkflowTaskGetOutput
from runtime.human_tasks import get_task
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowTaskGetInput, call: ToolCall) -> WorkflowTaskGetOutput:
    """One human task the caller is an assignee of."""
    return await get_task(call.services.database, call.context, args.task_id)
