"""Handler of workflow_binding_retire."""

from __future__ import annotations

from generated.models import WorkflowBindingRetireInput, WorkflowBindingRetireOutput
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import retire_binding


async def handle(args: WorkflowBindingRetireInput, call: ToolCall) -> WorkflowBindingRetireOutput:
    """Retire the active revision and withdraw a pending one."""
    return await retire_binding(call.services.database, call.context, args, call.arguments)
