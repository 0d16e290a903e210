"""Handler of workflow_binding_revoke."""

from __future__ import annotations

from typing import Any

from generated.models import WorkflowBindingRevokeInput
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import revoke_binding


async def handle(args: WorkflowBindingRevokeInput, call: ToolCall) -> dict[str, Any]:
    """Revoke the active revision (definition owner only)."""
    return await revoke_binding(call.services.database, call.context, call.arguments)
