"""Handler of workflow_wait_result."""

from __future__ import annotations

from generated.models import WorkflowWaitResultInput, WorkflowWaitResultOutput
from runtime.invocation import MAX_WAIT_MS, given, wait_result
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowWaitResultInput, call: ToolCall) -> WorkflowWaitResultOutput:
    """Wait (bounded) for one of the caller's runs; never returns null for a finished run."""
    wait_ms = given(args.wait_ms)
    result = await wait_result(
        call.services.database,
        call.context,
        args.workflow_instance_id,
        MAX_WAIT_MS if wait_ms is None else wait_ms,
        call.services.settings.security,
    )
    return WorkflowWaitResultOutput(
        workflow_instance_id=result.workflow_instance_id,
        state=result.state,
        definition_digest=result.definition_digest,
        output=result.output,
    )
