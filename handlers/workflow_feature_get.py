"""Handler of workflow_feature_get."""

from __future__ import annotations

from generated.models import WorkflowFeatureGetInput, WorkflowFeatureGetOutput
from runtime.features import get_feature
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowFeatureGetInput, call: ToolCall) -> WorkflowFeatureGetOutput:
    """See runtime.features.get_feature."""
    return await get_feature(call.services.database, call.context, args)
