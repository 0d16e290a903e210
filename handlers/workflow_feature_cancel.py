"""Handler of workflow_feature_cancel."""

from __future__ import annotations

from generated.models import WorkflowFeatureCancelInput, WorkflowFeatureCancelOutput
from runtime.features import cancel_feature
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowFeatureCancelInput, call: ToolCall) -> WorkflowFeatureCancelOutput:
    """See runtime.features.cancel_feature."""
    return await cancel_feature(call.services.database, call.context, args)
