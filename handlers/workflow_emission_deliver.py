"""Handler of workflow_emission_deliver (the Lightspeed receiver bridge, issue 37)."""

from __future__ import annotations

import httpx
import msgspec

from generated.models import WorkflowEmissionDeliverInput, WorkflowEmissionDeliverOutput
from runtime.invocation import disclosure_ceiling, given
from runtime.mcp.call import ToolCall
from runtime.receiver import Bridge, deliver, parse


async def handle(
    args: WorkflowEmissionDeliverInput, call: ToolCall
) -> WorkflowEmissionDeliverOutput:
    """Act on one delivered emission (or start args) once; a repeat gets the recorded outcome."""
    document = parse(given(args.envelope), given(args.start_args))
    services = call.services
    settings = services.settings.lightspeed
    async with httpx.AsyncClient(timeout=settings.request_timeout_s) as client:
        bridge = Bridge(
            db=services.database,
            keyring=services.keyring,
            admission=services.admission,
            settings=settings,
            client=client,
            disclosure_ceiling=disclosure_ceiling(call.context, services.settings.security),
        )
        outcome, duplicate = await deliver(bridge, call.context, document)
    return msgspec.convert(outcome | {"duplicate": duplicate}, WorkflowEmissionDeliverOutput)
