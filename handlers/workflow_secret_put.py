"""Handler of workflow_secret_put."""

from __future__ import annotations

from generated.models import WorkflowSecretPutInput, WorkflowSecretPutOutput
from runtime.mcp.call import ToolCall
from runtime.publication import put_secret


async def handle(args: WorkflowSecretPutInput, call: ToolCall) -> WorkflowSecretPutOutput:
    """Seal a host secret as its name's next version (idempotent per operationId)."""
    services = call.services
    return await put_secret(services.database, services.keyring, call.context, args, call.arguments)
