"""Handler of workflow_task_list."""

from __future__ import annotations

from generated.models import WorkflowTaskListInput, WorkflowTaskListOutput
from runtime.human_tasks import list_tasks
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowTaskListInput, call: ToolCall) -> WorkflowTaskListOutput:
    """The caller's human tasks on their host."""
    return await list_tasks(call.services.database, call.context, args)
