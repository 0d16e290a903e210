"""Handler of workflow_feature_stage_start."""

from __future__ import annotations

from generated.models import WorkflowFeatureStageStartInput, WorkflowFeatureStageStartOutput
from runtime import telemetry
from runtime.features import StartServices, start_stage
from runtime.invocation import disclosure_ceiling
from runtime.mcp.call import ToolCall


async def handle(
    args: WorkflowFeatureStageStartInput, call: ToolCall
) -> WorkflowFeatureStageStartOutput:
    """Claim a feature stage and start its definition in one transaction."""
    services = call.services
    security = services.settings.security
    start = StartServices(
        keyring=services.keyring,
        admission=services.admission,
        # A stage start is a workflow_start of the stage definition: the same role list.
        start_roles=security.roles_for("workflow_start"),
        disclosure_ceiling=disclosure_ceiling(call.context, security),
    )
    return await telemetry.admission(
        "start", start_stage(services.database, call.context, args, start)
    )
