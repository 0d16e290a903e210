"""Handler of workflow_start."""

from __future__ import annotations

from generated.models import WorkflowStartInput, WorkflowStartOutput
from runtime import telemetry
from runtime.admission import start_workflow
from runtime.invocation import StartRequest, disclosure_ceiling, given
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowStartInput, call: ToolCall) -> WorkflowStartOutput:
    """Start the saved head of a definition and return the receipt at once."""
    request = StartRequest(
        wf_def_id=args.wf_def_id,
        input=args.input,
        idempotency_key=given(args.idempotency_key),
        expected_definition_digest=given(args.expected_definition_digest),
        disclosure_ceiling=disclosure_ceiling(call.context, call.services.settings.security),
    )
    services = call.services
    return await telemetry.admission(
        "start",
        start_workflow(
            services.database,
            call.context,
            request,
            services.keyring,
            admission=services.admission,
            start_roles=services.settings.security.roles_for("workflow_start"),
        ),
    )
