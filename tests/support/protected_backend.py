"""A protected HTTP backend that checks the bearer, and Tools whose HTTP calls reach it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from runtime.canonical import definition_digest
from runtime.collaborators import Services
from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.scheduler import Executor
from tests.support.binding_builders import (
    EVIDENCE,
    POLICY_DIGEST,
    binding,
    endpoint_target,
    new_id,
    publish_args,
    write_binding,
)
from tests.support.execution import FAST, read_body
from tests.support.invocation import Tool, ok, publish_version, save_head
from tests.support.mcp import McpTestClient

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

RUN_CREDENTIAL_POLICY = (
    "use:\n  authentications:\n    claimsApi:\n      bearer:\n        use: runCredential\n"
)


@dataclass
class ProtectedBackend:
    """ASGI app: 200 only for `Authorization: Bearer <an accepted token>`, else 401."""

    accepted: set[str] = field(default_factory=set)
    # Accepts a token the set does not list (for tokens minted during the run: exchanged ones).
    accept: Callable[[str], bool] | None = None
    seen: list[str | None] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # the path of each request, in order
    # Awaited before the first request is answered (a test holds the run there).
    before_first_reply: Callable[[], Awaitable[None]] | None = None
    # Called once each reply was sent (a test revokes a grant there).
    after_reply: Callable[[], None] | None = None
    port: int = 0

    @property
    def base(self) -> str:
        """The backend's origin."""
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        authorization = headers.get("authorization")
        self.seen.append(authorization)
        self.paths.append(scope["path"])
        if len(self.seen) == 1 and self.before_first_reply is not None:
            await self.before_first_reply()
        token = None if authorization is None else authorization.removeprefix("Bearer ")
        granted = token is not None and (
            token in self.accepted or (self.accept is not None and self.accept(token))
        )
        status, payload = (200, {"claim": "C-1001", "n": len(self.seen)}) if granted else (401, {})
        body = json.dumps(payload).encode()
        start = {"type": "http.response.start", "status": status}
        start["headers"] = [(b"content-type", b"application/json")]
        await send(start)
        await send({"type": "http.response.body", "body": body})
        if self.after_reply is not None:
            self.after_reply()


def http_task(name: str, method: str, uri: str, *, authenticated: bool, write: bool) -> str:
    """A `call: http` task; with authenticated it names the claimsApi policy."""
    endpoint = f"        endpoint: {uri}\n"
    if authenticated:
        endpoint = (
            f"        endpoint:\n          uri: {uri}\n"
            "          authentication:\n            use: claimsApi\n"
        )
    meta = f"      metadata:\n        approvalEvidenceDigest: {EVIDENCE}\n" if write else ""
    return (
        f"  - {name}:\n      call: http\n      with:\n        method: {method}\n" + endpoint + meta
    )


def calling_definition(*tasks: str, policy: str = RUN_CREDENTIAL_POLICY) -> str:
    """A definition with the claimsApi authentication policy and the given tasks."""
    return (
        'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
        '  version: "1.2.0"\n'
        + policy
        + "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
        + "do:\n"
        + "".join(tasks)
    )


async def publish_calling_tool(
    owner: McpTestClient,
    text: str,
    backend_uri: str,
    *,
    write: bool = False,
    policy_digest: str = POLICY_DIGEST,
) -> Tool:
    """Save, publish and self-approve a Tool whose endpoint target is backend_uri."""
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    await publish_version(owner, wf_def_id, text, "1.2.0")
    tool_id = new_id()
    value = (write_binding if write else binding)(wf_def_id, tool_id, text)
    targets = [endpoint_target(uri=backend_uri, policy_digest=policy_digest)]
    receipt = ok(
        await owner.call_tool(
            "workflow_binding_publish", publish_args(value, 0, endpoint_targets=targets)
        )
    )
    assert receipt["status"] == "active", receipt
    return Tool(
        tool_id=tool_id,
        wf_def_id=wf_def_id,
        binding_id=receipt["bindingId"],
        binding_digest=receipt["bindingDigest"],
        definition_digest=definition_digest(text),
        aggregate_version=receipt["aggregateVersion"],
        text=text,
    )


@asynccontextmanager
async def verifying_executor(
    services: Services, settings: ExecutionSettings | None = None
) -> AsyncIterator[Executor]:
    """An executor whose runs verify their token before every call, as the service does."""
    runtime = WorkflowRuntime.verifying(
        settings or ExecutionSettings(),
        services.keyring,
        services.settings.security,
        destinations=services.settings.publication.destinations.address_policy(),
        resolver=services.resolver,
    )
    async with Executor(
        services.database, runtime.handlers(), FAST, probe=services.admission
    ) as executor:
        yield executor
    await runtime.aclose()
