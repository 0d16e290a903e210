"""Handler of workflow_binding_list."""

from __future__ import annotations

from generated.models import WorkflowBindingListInput, WorkflowBindingListOutput
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import list_bindings


async def handle(args: WorkflowBindingListInput, call: ToolCall) -> WorkflowBindingListOutput:
    """List revisions by definition or by the caller's relationship, with pending counts."""
    return await list_bindings(call.services.database, call.context, args)
