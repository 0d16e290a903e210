"""Handler of workflow_binding_get."""

from __future__ import annotations

from generated.models import WorkflowBindingGetInput, WorkflowBindingGetOutput
from handlers._bindings import destination_policy
from runtime.mcp.call import ToolCall
from runtime.publication.bindings import get_binding


async def handle(args: WorkflowBindingGetInput, call: ToolCall) -> WorkflowBindingGetOutput:
    """Read a revision with its reach, write tasks, decisions, the active revision and drift."""
    # Whoever may retire a Tool must be able to read the head version retirement expects.
    retirers = call.services.settings.security.roles_for("workflow_binding_retire")
    may_retire = retirers is not None and call.context.has_any_role(retirers)
    return await get_binding(
        call.services.database,
        call.context,
        args,
        may_retire=may_retire,
        policy=destination_policy(call),
    )
