"""Handler of workflow_binding_publish."""

from __future__ import annotations

from generated.models import WorkflowBindingPublishInput, WorkflowBindingPublishOutput
from handlers._bindings import destination_policy
from runtime.mcp.call import InputFailure, ToolCall
from runtime.publication.bindings import (
    InvalidBindingRequest,
    failed_section,
    publish_binding,
    publish_envelope,
    refuse_publish_request,
)


async def handle(args: WorkflowBindingPublishInput, call: ToolCall) -> WorkflowBindingPublishOutput:
    """Publish a binding revision; its status follows the status rules."""
    database, context = call.services.database, call.context
    return await publish_binding(
        database,
        context,
        args,
        call.arguments,
        policy=destination_policy(call),
        maximum_parallelism=call.services.settings.execution.maximum_parallelism,
    )


async def refuse(failure: InputFailure, call: ToolCall) -> WorkflowBindingPublishOutput:
    """Store a refused binding or reach with its evidence when the operation can be fenced.

    Seed 000: a catalog-validator failure inside binding (bindingFields) or inside
    dependencies/endpointTargets (bindingReach) is a request-only rejection stored under the
    operationId; any other failure, or an envelope too broken to fence, is a plain refusal.
    """
    section = failed_section(failure.path, failure.rule)
    envelope = publish_envelope(call.arguments) if section is not None else None
    if section is None or envelope is None:
        raise failure.error()
    rejection = InvalidBindingRequest(section, failure.message, failure.problems)
    return await refuse_publish_request(
        call.services.database, call.context, envelope, rejection, call.arguments
    )
