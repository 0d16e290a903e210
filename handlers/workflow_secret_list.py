"""Handler of workflow_secret_list."""

from __future__ import annotations

from generated.models import WorkflowSecretListInput, WorkflowSecretListOutput
from runtime.mcp.call import ToolCall
from runtime.publication import list_secrets


async def handle(args: WorkflowSecretListInput, call: ToolCall) -> WorkflowSecretListOutput:
    """List the host's secrets (names, versions, references; never values)."""
    return await list_secrets(call.services.database, call.context, args)
