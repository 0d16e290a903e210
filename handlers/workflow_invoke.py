"""Handler of workflow_invoke."""

from __future__ import annotations

from generated.models import WorkflowInvokeInput, WorkflowInvokeOutput
from runtime.admission import invoke_tool
from runtime.invocation import InvokeRequest, disclosure_ceiling, given
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowInvokeInput, call: ToolCall) -> WorkflowInvokeOutput:
    """Admit the call against the Tool's active revision and wait for its result."""
    request = InvokeRequest(
        stable_tool_ref=args.stable_tool_ref,
        input=args.input,
        expected_definition_digest=args.expected_definition_digest,
        expected_binding_digest=given(args.expected_binding_digest),
        idempotency_key=given(args.idempotency_key),
        parent_action_id=given(args.parent_action_id),
        disclosure_ceiling=disclosure_ceiling(call.context, call.services.settings.security),
    )
    services = call.services
    return await invoke_tool(
        services.database,
        call.context,
        request,
        services.keyring,
        admission=services.admission,
    )
