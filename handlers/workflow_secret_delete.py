"""Handler of workflow_secret_delete."""

from __future__ import annotations

from generated.models import WorkflowSecretDeleteInput, WorkflowSecretDeleteOutput
from runtime.mcp.call import ToolCall
from runtime.publication import delete_secret


async def handle(args: WorkflowSecretDeleteInput, call: ToolCall) -> WorkflowSecretDeleteOutput:
    """Delete a host secret no published definition declares (idempotent per operationId)."""
    return await delete_secret(call.services.database, call.context, args, call.arguments)
