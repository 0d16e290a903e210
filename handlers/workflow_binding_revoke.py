"""Handler of workflow_binding_revoke."""

from __future__ import annotations

from generated.models import WorkflowBindingRevokeInput, WorkflowBindingRevokeOutput
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import revoke_binding


async def handle(args: WorkflowBindingRevokeInput, call: ToolCall) -> WorkflowBindingRevokeOutput:
    """Revoke the active revision (definition owner only)."""
    return await revoke_binding(call.services.database, call.context, args, call.arguments)
