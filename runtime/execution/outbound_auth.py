"""Credentials on outbound HTTP: a task's `authentication` becomes the selected run token."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from runtime.engine.run import HttpRequest
from runtime.errors import WorkflowError
from runtime.execution.credential import RunToken
from runtime.execution.targets import on_origin, origin_of

TokenSource = Callable[[], Awaitable[RunToken]]


async def with_credential(
    request: HttpRequest, token: TokenSource, gateway_url: str | None
) -> HttpRequest:
    """The request as sent: with `Authorization: Bearer <run token>` when the task asks for it.

    The token comes from the run credential selector (seed 000 "Run credential selection"), the
    same one MCP calls use, so an expired or unverifiable token stops the call before anything
    leaves. Any Authorization header the definition built itself is dropped: a task that names
    a runtime-managed policy never chooses its own credential.

    The target follows the selected token: once the selector exchanged the run's token, the
    call goes to the configured Gateway origin (the origin of gateway_url) with the approved
    path and query, never to the approved endpoint directly; with no Gateway configured it is
    refused before anything leaves.
    """
    if request.authentication is None:
        return request
    selected = await token()
    headers = {
        name: value for name, value in request.headers.items() if name.lower() != "authorization"
    }
    headers["authorization"] = f"Bearer {selected.token.reveal()}"
    uri = request.uri
    if selected.exchanged:
        if gateway_url is None:
            raise WorkflowError(
                "WORKFLOW_POLICY_DENIED",
                "the run's token was exchanged, so its protected HTTP calls must go through the "
                "Gateway, and none is configured: set execution.outbound.gateway_mcp_url",
                status="failed",
            )
        uri = on_origin(uri, origin_of(gateway_url))
    return dataclasses.replace(request, headers=headers, uri=uri)
