"""Credentials on outbound calls: a task's authentication policy applied as the call leaves.

The engine builds requests from the definition and the run's data only; the credential joins
here, on the way out, so it never enters the run's state, its results, errors or logs: the
run token from the run credential selector, or host secrets opened at dispatch (issue 24).
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Awaitable, Callable

from runtime.engine.model import CredentialPolicy
from runtime.engine.run import EffectFailure, HttpRequest
from runtime.errors import WorkflowError
from runtime.execution.credential import RunToken
from runtime.execution.targets import on_origin, origin_of
from runtime.security import SecretToken

TokenSource = Callable[[], Awaitable[RunToken]]
# The current value of a host secret by name; EffectFailure when missing or unopenable.
SecretSource = Callable[[str], Awaitable[SecretToken]]


async def policy_header(
    policy: CredentialPolicy, token: TokenSource, secret: SecretSource
) -> tuple[str, str]:
    """(header name in lower case, value) a policy sends."""
    if policy.scheme == "runCredential":
        return "authorization", f"Bearer {(await token()).token.reveal()}"
    assert policy.secret is not None  # every secret scheme names one (parse_authentications)
    value = (await secret(policy.secret)).reveal()
    if policy.scheme == "bearer":
        return "authorization", f"Bearer {value}"
    if policy.scheme == "basic":
        username = policy.username
        if policy.username_secret is not None:
            username = (await secret(policy.username_secret)).reveal()
        pair = f"{username}:{value}".encode()
        return "authorization", f"Basic {base64.b64encode(pair).decode('ascii')}"
    return policy.header, value


async def with_credential(
    request: HttpRequest,
    token: TokenSource,
    secret: SecretSource | None = None,
    gateway_url: str | None = None,
) -> HttpRequest:
    """The request as sent: with the header its authentication policy sends, if any.

    The run token comes from the run credential selector (seed 000 "Run credential
    selection"), the same one MCP calls use, so an expired or unverifiable token stops the call
    before anything leaves; a secret is read and opened now, so the next call after a rotation
    sends the new value. A header of the same name the task built itself is dropped: a task
    that names a policy never chooses its own credential.

    The target follows the selected run token: once the selector exchanged it, the call goes to
    the configured Gateway origin (the origin of gateway_url) with the approved path and query,
    never to the approved endpoint directly; with no Gateway configured it is refused before
    anything leaves. A call authenticated by a host secret carries no run token and goes direct.
    """
    if request.authentication is None:
        return request
    policy = request.credential or CredentialPolicy(request.authentication, "runCredential")
    uri = request.uri
    if policy.scheme == "runCredential":
        selected = await token()
        name, value = "authorization", f"Bearer {selected.token.reveal()}"
        if selected.exchanged:
            uri = on_origin(uri, origin_of(_gateway(gateway_url)))
    else:
        name, value = await policy_header(policy, token, secret or _no_secrets)
    headers = {key: item for key, item in request.headers.items() if key.lower() != name}
    headers[name] = value
    return dataclasses.replace(request, headers=headers, uri=uri)


def _gateway(gateway_url: str | None) -> str:
    if gateway_url is None:
        raise WorkflowError(
            "WORKFLOW_POLICY_DENIED",
            "the run's token was exchanged, so its protected HTTP calls must go through the "
            "Gateway, and none is configured: set execution.outbound.gateway_mcp_url",
            status="failed",
        )
    return gateway_url


async def _no_secrets(name: str) -> SecretToken:
    raise EffectFailure("authorization", f"secret {name} is not available here", 403)
