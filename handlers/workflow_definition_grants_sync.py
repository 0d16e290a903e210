"""Handler of workflow_definition_grants_sync."""

from __future__ import annotations

from generated.models import WorkflowDefinitionGrantsSyncInput, WorkflowDefinitionGrantsSyncOutput
from runtime.mcp.call import ToolCall
from runtime.publication import sync_definition_grants


async def handle(
    args: WorkflowDefinitionGrantsSyncInput, call: ToolCall
) -> WorkflowDefinitionGrantsSyncOutput:
    """Replace a definition's whole grant set under the sourceRevision rules."""
    return await sync_definition_grants(call.services.database, call.context, args)
