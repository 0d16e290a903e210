"""Handler of workflow_definition_draft."""

from __future__ import annotations

from generated.models import WorkflowDefinitionDraftInput, WorkflowDefinitionDraftOutput
from runtime.authoring import draft_definition
from runtime.mcp.call import ToolCall


async def handle(
    args: WorkflowDefinitionDraftInput, call: ToolCall
) -> WorkflowDefinitionDraftOutput:
    """Draft a definition from the selected Tools with the authoring model; stores nothing."""
    services = call.services
    return await draft_definition(
        services.database, services.settings.authoring, call.context, args
    )
