"""Handler of workflow_definition_retire."""

from __future__ import annotations

from generated.models import WorkflowDefinitionRetireInput, WorkflowDefinitionRetireOutput
from runtime.mcp.call import ToolCall
from runtime.publication import retire_definition


async def handle(
    args: WorkflowDefinitionRetireInput, call: ToolCall
) -> WorkflowDefinitionRetireOutput:
    """Retire a published definition version (terminal; idempotent per operationId)."""
    return await retire_definition(call.services.database, call.context, args, call.arguments)
