"""Handler of workflow_wait_result."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from generated.models import WorkflowWaitResultInput
from runtime.invocation import MAX_WAIT_MS, wait_result
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowWaitResultInput, call: ToolCall) -> dict[str, Any]:
    """Wait (bounded) for one of the caller's runs; never returns null for a finished run."""
    wait_ms = MAX_WAIT_MS if args.wait_ms is UNSET else int(args.wait_ms)
    return await wait_result(
        call.services.database, call.context, args.workflow_instance_id, wait_ms
    )
