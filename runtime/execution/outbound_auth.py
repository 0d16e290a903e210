"""Credentials on outbound HTTP: a task's `authentication` becomes the selected run token."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from runtime.engine.run import HttpRequest
from runtime.security import SecretToken

TokenSource = Callable[[], Awaitable[SecretToken]]


async def with_credential(request: HttpRequest, token: TokenSource) -> HttpRequest:
    """The request as sent: with `Authorization: Bearer <run token>` when the task asks for it.

    The token comes from the run credential selector (seed 000 "Run credential selection"), the
    same one MCP calls use, so an expired or unverifiable token stops the call before anything
    leaves. Any Authorization header the definition built itself is dropped: a task that names
    a runtime-managed policy never chooses its own credential.
    """
    if request.authentication is None:
        return request
    selected = await token()
    headers = {
        name: value for name, value in request.headers.items() if name.lower() != "authorization"
    }
    headers["authorization"] = f"Bearer {selected.reveal()}"
    return dataclasses.replace(request, headers=headers)
