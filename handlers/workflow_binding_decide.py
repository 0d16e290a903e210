"""Handler of workflow_binding_decide."""

from __future__ import annotations

from generated.models import WorkflowBindingDecideInput, WorkflowBindingDecideOutput
from handlers._bindings import destination_policy
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import decide_binding


async def handle(args: WorkflowBindingDecideInput, call: ToolCall) -> WorkflowBindingDecideOutput:
    """Approve or reject a pending revision (definition owner only)."""
    database, context = call.services.database, call.context
    return await decide_binding(
        database,
        context,
        args,
        call.arguments,
        policy=destination_policy(call),
        maximum_parallelism=call.services.settings.execution.maximum_parallelism,
    )
