"""Handler of workflow_binding_retire."""

from __future__ import annotations

from generated.models import WorkflowBindingRetireInput, WorkflowBindingRetireOutput
from handlers._bindings import destination_policy
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import retire_binding


async def handle(args: WorkflowBindingRetireInput, call: ToolCall) -> WorkflowBindingRetireOutput:
    """Retire the active revision and withdraw a pending one (with a repin plan, if given)."""
    return await retire_binding(
        call.services.database,
        call.context,
        args,
        call.arguments,
        policy=destination_policy(call),
        maximum_parallelism=call.services.settings.execution.maximum_parallelism,
    )
