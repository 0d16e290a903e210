"""Handler of workflow_definition_publish."""

from __future__ import annotations

from generated.models import WorkflowDefinitionPublishInput, WorkflowDefinitionPublishOutput
from runtime.mcp.call import ToolCall
from runtime.publication import publish_definition


async def handle(
    args: WorkflowDefinitionPublishInput, call: ToolCall
) -> WorkflowDefinitionPublishOutput:
    """Publish an immutable definition version (idempotent per operationId)."""
    return await publish_definition(call.services.database, call.context, args, call.arguments)
