"""Shared builders for the invocation tests (no tests here): Tools, callers, an executor."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from runtime.canonical import definition_digest
from runtime.collaborators import Services
from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.scheduler import Executor
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import (
    HOST,
    OWNER,
    OWNER_POSITION,
    binding,
    definition_yaml,
    endpoint_target,
    new_id,
    owner_ctx,
    publish_args,
    write_binding,
)
from tests.support.execution import FAST
from tests.support.mcp import MODERN, McpTestClient
from tests.support.publication import versioned
from tests.support.service_calls import publish_binding
from tests.support.tokens import auth_headers

CALLER = "caller-1"

FAILING_TASK = (
    "  - boom:\n      raise:\n        error:\n          type: https://errors.example.com/boom\n"
    "          status: 500\n          title: claim lookup failed\n"
    "          detail: the claim service said no\n"
)
SLOW_TASK = "  - pause:\n      wait: PT3S\n"


@dataclass(frozen=True)
class Tool:
    """A published, owner-approved workflow-backed Tool."""

    tool_id: str
    wf_def_id: str
    binding_id: str
    binding_digest: str
    definition_digest: str
    aggregate_version: int
    text: str


def ok(result: dict[str, Any]) -> dict[str, Any]:
    """The structured output of a successful call."""
    assert result["isError"] is False, result
    return dict(result["structuredContent"])


def refused(result: dict[str, Any], code: str) -> dict[str, Any]:
    """The structuredContent of an isError result whose error has that code.

    Without details.correlationId: each call has its own (its trace id), so a replay or a
    stored error compares equal without it (tests/integration/composition/test_telemetry.py
    checks it).
    """
    assert result["isError"] is True, result
    body = dict(result["structuredContent"])
    assert body["error"]["code"] == code, body
    error = dict(body["error"])
    details = {k: v for k, v in (error.get("details") or {}).items() if k != "correlationId"}
    if details:
        error["details"] = details
    else:
        error.pop("details", None)
    return {**body, "error": error}


async def until_settled(
    call: Callable[[], Awaitable[dict[str, Any]]], *, within_s: float = 15.0
) -> dict[str, Any]:
    """Repeat a call while it answers a retryable WORKFLOW_TIMEOUT, as a Gateway retry re-attaches.

    A short syncWaitMs can end before a busy machine finishes the run; the retry attaches to the
    same instance, so repeating it is exactly the client behaviour the contract promises.
    """
    async with asyncio.timeout(within_s):
        while True:
            result = await call()
            error = result["structuredContent"].get("error") if result["isError"] else None
            if error is None or error["code"] != "WORKFLOW_TIMEOUT" or not error["retryable"]:
                return result


def client(
    http: httpx.AsyncClient,
    identity: DevIdentity,
    user_id: str = CALLER,
    *,
    roles: tuple[str, ...] = ("admin", "workflow-admin"),
    positions: tuple[str, ...] = (),
    host_id: str = HOST,
    user_client_id: str = "portal",
    ttl: int = 3600,
) -> McpTestClient:
    """An MCP client for one user of a host, through the Gateway's app token."""
    user = identity.user_token(
        host_id=host_id,
        user_id=user_id,
        roles=roles,
        positions=positions,
        client_id=user_client_id,
        ttl=ttl,
    )
    app = identity.app_token(host_id=host_id)
    return McpTestClient(http, MODERN, auth_headers(identity, user, app))


async def save_head(owner: McpTestClient, wf_def_id: str, text: str, revision: int = 1) -> str:
    """Save the definition head with text; returns its digest."""
    args = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "sourceRevision": revision,
        "actor": "steve",
        "namespace": "claims",
        "name": "summarize-claim",
        "version": "1.2.0",
        "definition": text,
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": False,
        "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
        "active": True,
    }
    ok(await owner.call_tool("workflow_definition_save", args))
    return definition_digest(text)


async def publish_version(owner: McpTestClient, wf_def_id: str, text: str, version: str) -> None:
    """Publish one definition version (text must declare that document.version)."""
    args = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "namespace": "claims",
        "name": "summarize-claim",
        "version": version,
        "definition": text,
        "expectedDefinitionDigest": definition_digest(text),
        "bindingApproval": "carryOver",
        "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
        "operationId": new_id(),
    }
    ok(await owner.call_tool("workflow_definition_publish", args))


async def publish_tool(
    owner: McpTestClient,
    *,
    text: str | None = None,
    tool_id: str | None = None,
    wf_def_id: str | None = None,
    version: str = "1.2.0",
    expected_version: int = 0,
    **changes: Any,
) -> Tool:
    """Save (first time), publish a version and self-approve a binding revision as the owner."""
    text = versioned(text if text is not None else definition_yaml(), version)
    if wf_def_id is None:
        wf_def_id = new_id()
        await save_head(owner, wf_def_id, definition_yaml())
    await publish_version(owner, wf_def_id, text, version)
    tool_id = tool_id or new_id()
    value = binding(wf_def_id, tool_id, text, version=version, **changes)
    receipt = ok(
        await owner.call_tool("workflow_binding_publish", publish_args(value, expected_version))
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


def invoke_args(tool: Tool, data: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """workflow_invoke arguments as the Gateway sends them."""
    args: dict[str, Any] = {
        "stableToolRef": tool.tool_id,
        "expectedBindingDigest": tool.binding_digest,
        "expectedDefinitionDigest": tool.definition_digest,
        "input": data if data is not None else {"claimId": "C-1001"},
    }
    args.update(extra)
    return args


def revoke_args(tool: Tool) -> dict[str, Any]:
    """workflow_binding_revoke arguments for the Tool's active binding (a fresh operation)."""
    return {
        "hostId": HOST,
        "bindingId": tool.binding_id,
        "expectedBindingDigest": tool.binding_digest,
        "comment": "no longer approved",
        "operationId": new_id(),
    }


@asynccontextmanager
async def running_executor(
    services: Services, settings: ExecutionSettings | None = None
) -> AsyncIterator[Executor]:
    """An in-process executor running workflow tasks on the test database."""
    runtime = WorkflowRuntime(
        settings or ExecutionSettings(),
        services.keyring,
        destinations=services.settings.publication.destinations.address_policy(),
        resolver=services.resolver,
    )
    async with Executor(
        services.database, runtime.handlers(), FAST, probe=services.admission
    ) as executor:
        yield executor
    await runtime.aclose()


LOCAL_WRITE_EVIDENCE = "sha256:" + "e" * 64


def posting_definition(base: str, then: str = "") -> str:
    """A definition whose one write POSTs to {base}/claims, followed by the tasks in then."""
    return (
        'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
        '  version: "1.2.0"\n'
        "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
        "do:\n  - save:\n      call: http\n      with:\n        method: POST\n"
        f"        endpoint: {base}/claims\n"
        f"      metadata:\n        approvalEvidenceDigest: {LOCAL_WRITE_EVIDENCE}\n"
        f"{then}"
    )


async def publish_local_write_tool(
    owner: McpTestClient, services: Services, base: str, then: str = "", **changes: Any
) -> Tool:
    """A write Tool on a local backend (published with a policy that admits plain http)."""
    text = posting_definition(base, then)
    wf_def_id, tool_id = new_id(), new_id()
    await save_head(owner, wf_def_id, text)
    await publish_version(owner, wf_def_id, text, "1.2.0")
    value = write_binding(wf_def_id, tool_id, text, **changes)
    args = publish_args(value, 0, endpoint_targets=[endpoint_target("claims", f"{base}/claims")])
    receipt = await publish_binding(services.database, owner_ctx(), args, local_backends=True)
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
