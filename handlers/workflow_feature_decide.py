"""Handler of workflow_feature_decide."""

from __future__ import annotations

from generated.models import WorkflowFeatureDecideInput, WorkflowFeatureDecideOutput
from runtime.features import decide_feature
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowFeatureDecideInput, call: ToolCall) -> WorkflowFeatureDecideOutput:
    """See runtime.features.decide_feature."""
    return await decide_feature(call.services.database, call.context, args)
