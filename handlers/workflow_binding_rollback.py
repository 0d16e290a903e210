"""Handler of workflow_binding_rollback."""

from __future__ import annotations

from generated.models import WorkflowBindingRollbackInput, WorkflowBindingRollbackOutput
from handlers._bindings import destination_policy
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import rollback_binding


async def handle(
    args: WorkflowBindingRollbackInput, call: ToolCall
) -> WorkflowBindingRollbackOutput:
    """Restore the previous approved revision as a new active one (definition owner only)."""
    return await rollback_binding(
        call.services.database,
        call.context,
        args,
        call.arguments,
        policy=destination_policy(call),
        maximum_parallelism=call.services.settings.execution.maximum_parallelism,
    )
