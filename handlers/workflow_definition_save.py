"""Handler of workflow_definition_save."""

from __future__ import annotations

from generated.models import WorkflowDefinitionSaveInput, WorkflowDefinitionSaveOutput
from runtime.mcp.call import ToolCall
from runtime.publication import save_definition


async def handle(args: WorkflowDefinitionSaveInput, call: ToolCall) -> WorkflowDefinitionSaveOutput:
    """Save a definition head under the sourceRevision rules."""
    return await save_definition(call.services.database, call.context, args)
