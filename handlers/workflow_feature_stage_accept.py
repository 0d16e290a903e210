"""Handler of workflow_feature_stage_accept."""

from __future__ import annotations

from generated.models import WorkflowFeatureStageAcceptInput, WorkflowFeatureStageAcceptOutput
from runtime.features import accept_stage
from runtime.mcp.call import ToolCall


async def handle(
    args: WorkflowFeatureStageAcceptInput, call: ToolCall
) -> WorkflowFeatureStageAcceptOutput:
    """Accept the finished run of the active stage claim (or send the feature to a person)."""
    return await accept_stage(call.services.database, call.context, args)
