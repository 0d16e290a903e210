"""Handler of workflow_definition_publish."""

from __future__ import annotations

from generated.models import WorkflowDefinitionPublishInput, WorkflowDefinitionPublishOutput
from runtime.mcp.call import ToolCall
from runtime.publication import publish_definition
from runtime.publication.check_threads import off_loop
from runtime.publication.definition_limits import check_definition_size


async def handle(
    args: WorkflowDefinitionPublishInput, call: ToolCall
) -> WorkflowDefinitionPublishOutput:
    """Publish an immutable definition version (idempotent per operationId)."""
    # Size limits first: a huge definition is refused before any YAML or DSL parsing
    # (the scan itself runs off the serving loop).
    await off_loop(
        check_definition_size, args.definition, call.services.settings.publication.limits
    )
    return await publish_definition(call.services.database, call.context, args, call.arguments)
