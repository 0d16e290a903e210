"""Workflow's service token in tests (no tests here): a token endpoint and a checking Gateway.

The endpoint is the dev identity's client-credentials endpoint, counted and optionally held;
the Gateway stand-in speaks enough MCP for nested calls and verifies Workflow's X-Scope-Token
the moment each request arrives, so a token that expired in flight is refused like a real
Gateway would refuse it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jwt
import msgspec

from runtime.errors import AuthenticationError
from runtime.execution import (
    ExecutionSettings,
    ServiceTokenSettings,
    WorkflowRuntime,
    wait_for_result,
)
from runtime.execution.service_token import ServiceTokens
from runtime.security import Keyring, KeySet, SecretToken, TokenKind, TokenVerifier
from runtime.security.dev_client_credentials import DEV_SERVICE_CLIENT_ID, DevClientCredentials
from runtime.security.devtools import DevIdentity
from runtime.security.keyring import new_keyring_document
from runtime.store import Database
from tests.support.binding_builders import dependency, new_id
from tests.support.execution import LOCAL_BACKENDS, Receive, Send, executor, read_body, serving
from tests.support.execution_runs import start_workflow_run
from tests.support.publication_builders import HOST
from tests.support.published_workflow import USER_TOKEN
from tests.support.service_calls import checked_reach

SERVICE_SECRET = "service-client-secret-for-tests"


def service_token_settings(
    endpoint: TokenEndpoint, directory: Path, **overrides: Any
) -> ServiceTokenSettings:
    """Settings for Workflow's client at endpoint, its secret written to a file in directory."""
    secret_file = directory / "service-client-secret"
    secret_file.write_text(SERVICE_SECRET + "\n", encoding="utf-8")
    values: dict[str, Any] = {
        "endpoint": f"{endpoint.base}/token",
        "client_id": DEV_SERVICE_CLIENT_ID,
        "client_secret_file": str(secret_file),
        **overrides,
    }
    return ServiceTokenSettings(**values)


def expiry(token: str) -> float:
    """A JWT's exp (read unverified: the test minted it)."""
    return float(jwt.decode(token, options={"verify_signature": False})["exp"])


@dataclass
class TokenEndpoint:
    """ASGI: the dev client-credentials endpoint, counting requests; `held` makes them wait."""

    endpoint: DevClientCredentials
    requests: int = 0
    held: asyncio.Event | None = None
    port: int = 0

    @property
    def base(self) -> str:
        """The endpoint's origin."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def grants(self) -> int:
        """How many tokens it issued."""
        return self.endpoint.grants

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.requests += 1
        if self.held is not None:
            await self.held.wait()
        await self.endpoint(scope, receive, send)


@dataclass
class ScopeCheckingGateway:
    """ASGI MCP endpoint at /mcp: 401 unless X-Scope-Token verifies now as an app token.

    `revoked` tokens are refused although they verify (an early revocation), at the step
    `refuse_at` names: the session's initialize, or the tools/call itself.
    """

    identity: DevIdentity
    revoked: set[str] = field(default_factory=set)
    refuse_at: Literal["initialize", "call"] = "call"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    on_tool_call: Callable[[], Awaitable[None]] | None = None
    port: int = 0
    _verifier: TokenVerifier | None = None

    @property
    def base(self) -> str:
        """The Gateway's origin."""
        return f"http://127.0.0.1:{self.port}"

    def scope_tokens(self) -> list[str]:
        """The X-Scope-Token of each tools/call it answered."""
        return [call["scope"] for call in self.tool_calls]

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        message = json.loads(await read_body(receive) or b"{}")
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        method = message.get("method")
        token = headers.get("x-scope-token", "").removeprefix("Bearer ")
        step = "call" if method == "tools/call" else "initialize"
        if not self._accepts(token, step if method != "notifications/initialized" else None):
            self.refusals.append(step)
            await _reply(send, 401, {"error": "invalid_token"})
            return
        if method == "initialize":
            result: dict[str, Any] = {"protocolVersion": "2025-06-18", "capabilities": {}}
            await _reply(send, 200, {"jsonrpc": "2.0", "id": message["id"], "result": result})
            return
        if "id" not in message:
            await _reply(send, 202, None)
            return
        self.tool_calls.append({"scope": token, "params": message["params"]})
        if self.on_tool_call is not None:
            await self.on_tool_call()
        result = {"content": [], "structuredContent": {"n": len(self.tool_calls)}}
        await _reply(send, 200, {"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _accepts(self, token: str, step: str | None) -> bool:
        if self._verifier is None:
            # No leeway: a token past its exp is refused at once, as the test expects.
            security = msgspec.structs.replace(self.identity.settings(), clock_skew_seconds=0)
            self._verifier = TokenVerifier(security, KeySet.from_settings(security))
        try:
            self._verifier.verify(token, TokenKind.APP)
        except AuthenticationError:
            return False
        return not (token in self.revoked and step == self.refuse_at)


async def _reply(send: Send, status: int, payload: Any) -> None:
    body = b"" if payload is None else json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def fork_calls_yaml(width: int) -> str:
    """A definition whose one fork makes `width` concurrent accounts.lookup calls."""
    call = "              call: mcp\n              with:\n                tool: accounts.lookup\n"
    branches = "".join(
        f"          - b{i}:\n{call}                arguments: {{}}\n" for i in range(width)
    )
    return (
        'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
        '  version: "1.2.0"\n'
        "do:\n  - fan:\n      fork:\n        branches:\n"
        + branches
        + "  - done:\n      set:\n        calls: "
        + str(width)
        + "\n"
    )


async def run_nested(
    db: Database,
    settings: ExecutionSettings,
    wf_def_id: str,
    *,
    service_tokens: ServiceTokens | None = None,
    read_only: tuple[str, ...] = (),
    **kw: Any,
) -> dict[str, Any]:
    """Run a published definition to its end on an in-process executor with these settings
    (and this process's service token source, when the test holds it).

    read_only: Tools the run may call as reads. Only a Tool's binding pins a dependency as
    read-only, so the run is given a binding whose reach says so (held in the runtime's reach
    cache, as a Tool run's is after its first task: no revision row is needed).
    """
    keyring = Keyring.from_document(new_keyring_document("k1"))
    runtime = WorkflowRuntime(
        settings, keyring, destinations=LOCAL_BACKENDS, service_tokens=service_tokens
    )
    if read_only:
        binding_id = new_id()
        reach = checked_reach([dependency(name, read_only=True) for name in read_only], [])
        runtime._reaches[(HOST, binding_id)] = reach
        kw["binding_id"] = binding_id
    async with executor(db, runtime):
        pid = await start_workflow_run(
            db, host_id=HOST, user_id="u-1", input={}, keyring=keyring,
            credential=SecretToken(USER_TOKEN), wf_def_id=wf_def_id, version="1.2.0", **kw,
        )  # fmt: skip
        run = await wait_for_result(db, HOST, pid, timeout=30)
    assert run is not None
    # A plain document (with the run's id), as the tests read it.
    return msgspec.structs.asdict(run) | {"process_id": pid}


@dataclass
class GatewayAndEndpoint:
    """A served token endpoint and checking Gateway, and Workflow's settings that reach both."""

    endpoint: TokenEndpoint
    gateway: ScopeCheckingGateway
    directory: Path

    def settings(self, **token: Any) -> ExecutionSettings:
        """Execution settings: this Gateway, and a service token from this endpoint."""
        return ExecutionSettings(
            gateway_mcp_url=f"{self.gateway.base}/mcp",
            service_token=service_token_settings(self.endpoint, self.directory, **token),
        )

    async def revoked_token(self) -> tuple[ExecutionSettings, ServiceTokens]:
        """Settings, and Workflow's tokens whose current one the Gateway revoked before expiry."""
        settings = self.settings()
        tokens = ServiceTokens.from_settings(settings.service_token)
        assert tokens is not None
        self.gateway.revoked.add((await tokens.token()).reveal())
        return settings, tokens


@asynccontextmanager
async def serve_gateway_and_endpoint(
    identity: DevIdentity,
    directory: Path,
    *,
    secret: str = SERVICE_SECRET,
    ttl: int = 3600,
    refuse_at: Literal["initialize", "call"] = "call",
) -> AsyncIterator[GatewayAndEndpoint]:
    """Serve identity's token endpoint (tokens of ttl s for secret) and a checking Gateway."""
    endpoint = TokenEndpoint(identity.client_credentials(secret, ttl=ttl))
    gateway = ScopeCheckingGateway(identity, refuse_at=refuse_at)
    async with serving(endpoint), serving(gateway):
        yield GatewayAndEndpoint(endpoint, gateway, directory)


GatewayAndEndpointFactory = Callable[..., AbstractAsyncContextManager[GatewayAndEndpoint]]
