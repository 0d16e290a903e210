"""Handler of workflow_feature_create."""

from __future__ import annotations

from generated.models import WorkflowFeatureCreateInput, WorkflowFeatureCreateOutput
from runtime.features import create_feature
from runtime.mcp.call import ToolCall


async def handle(args: WorkflowFeatureCreateInput, call: ToolCall) -> WorkflowFeatureCreateOutput:
    """See runtime.features.create_feature."""
    return await create_feature(call.services.database, call.context, args)
