"""Handler of workflow_task_complete."""

from __future__ import annotations

from generated.models import WorkflowTaskCompleteInput, WorkflowTaskCompleteOutput
from runtime.human_tasks import complete_task
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowTaskCompleteInput, call: ToolCall) -> WorkflowTaskCompleteOutput:
    """Answer a human task; its run resumes."""
    return await complete_task(call.services.database, call.context, args)
