"""Handler of workflow_definition_retire."""

from __future__ import annotations

from typing import Any

from generated.models import WorkflowDefinitionRetireInput
from runtime.mcp.call import ToolCall
from runtime.publication import retire_definition


async def handle(args: WorkflowDefinitionRetireInput, call: ToolCall) -> dict[str, Any]:
    """Retire a published definition version (terminal; idempotent per operationId)."""
    return await retire_definition(call.services.database, call.context, call.arguments)
