"""Handler of workflow_definition_publish."""

from __future__ import annotations

from typing import Any

from generated.models import WorkflowDefinitionPublishInput
from runtime.mcp.call import ToolCall
from runtime.publication import publish_definition


async def handle(args: WorkflowDefinitionPublishInput, call: ToolCall) -> dict[str, Any]:
    """Publish an immutable definition version (idempotent per operationId)."""
    return await publish_definition(call.services.database, call.context, call.arguments)
