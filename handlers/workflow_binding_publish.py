"""Handler of workflow_binding_publish."""

from __future__ import annotations

from typing import Any

from generated.models import WorkflowBindingPublishInput
from handlers._bindings import destination_policy
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import publish_binding


async def handle(args: WorkflowBindingPublishInput, call: ToolCall) -> dict[str, Any]:
    """Publish a binding revision; its status follows the status rules."""
    database, context = call.services.database, call.context
    return await publish_binding(database, context, call.arguments, policy=destination_policy(call))
