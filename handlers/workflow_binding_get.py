"""Handler of workflow_binding_get."""

from __future__ import annotations

from generated.models import WorkflowBindingGetInput, WorkflowBindingGetOutput
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import get_binding


async def handle(args: WorkflowBindingGetInput, call: ToolCall) -> WorkflowBindingGetOutput:
    """Read a revision with its reach, write tasks, decisions and the active revision."""
    return await get_binding(call.services.database, call.context, args)
