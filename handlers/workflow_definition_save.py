"""Handler of workflow_definition_save."""

from __future__ import annotations

from typing import Any

from generated.models import WorkflowDefinitionSaveInput
from runtime.mcp.call import ToolCall
from runtime.publication import save_definition


async def handle(args: WorkflowDefinitionSaveInput, call: ToolCall) -> dict[str, Any]:
    """Save a definition head under the sourceRevision rules."""
    return await save_definition(call.services.database, call.context, call.arguments)
