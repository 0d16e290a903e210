"""Binding publication through POST /mcp: owner and author clients, publish and result checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from runtime.canonical import definition_digest
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import (
    AUTHOR,
    HOST,
    OWNER,
    OWNER_POSITION,
    definition_yaml,
    new_id,
)
from tests.support.mcp import MODERN, McpTestClient
from tests.support.tokens import auth_headers


@dataclass
class Actors:
    """MCP clients for the definition owner and a Tool author of the same host."""

    owner: McpTestClient
    author: McpTestClient


def actors_of(http: httpx.AsyncClient, dev_identity: DevIdentity) -> Actors:
    """Owner and author clients with admin role on HOST."""

    def client(user_id: str) -> McpTestClient:
        user = dev_identity.user_token(host_id=HOST, user_id=user_id, roles=("admin",))
        app = dev_identity.app_token(host_id=HOST)
        return McpTestClient(http, MODERN, auth_headers(dev_identity, user, app))

    return Actors(owner=client(OWNER), author=client(AUTHOR))


def ok(result: dict[str, Any]) -> dict[str, Any]:
    """The structured output of a successful call."""
    assert result["isError"] is False, result
    return dict(result["structuredContent"])


def refused(result: dict[str, Any], code: str) -> dict[str, Any]:
    """The error object of an isError result with that code."""
    assert result["isError"] is True, result
    error = dict(result["structuredContent"]["error"])
    assert error["code"] == code, error
    return error


async def publish_definition_text(
    owner: McpTestClient,
    text: str,
    wf_def_id: str | None = None,
    version: str = "1.2.0",
    *,
    approval: str = "carryOver",
) -> str:
    """Save the owner's head (first time) and publish text as a version; returns wfDefId."""
    if wf_def_id is None:
        wf_def_id = new_id()
        save = {
            "hostId": HOST,
            "wfDefId": wf_def_id,
            "sourceRevision": 1,
            "actor": "steve",
            "namespace": "claims",
            "name": "summarize-claim",
            "version": "1.2.0",
            "definition": definition_yaml(),
            "lifecycleStatus": "PUBLISHED",
            "catalogVisible": False,
            "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
            "active": True,
        }
        ok(await owner.call_tool("workflow_definition_save", save))
    publish = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "namespace": "claims",
        "name": "summarize-claim",
        "version": version,
        "definition": text,
        "expectedDefinitionDigest": definition_digest(text),
        "bindingApproval": approval,
        "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
        "operationId": new_id(),
    }
    ok(await owner.call_tool("workflow_definition_publish", publish))
    return wf_def_id


async def publish(client: McpTestClient, args: dict[str, Any]) -> dict[str, Any]:
    """Call workflow_binding_publish; the CallToolResult."""
    return await client.call_tool("workflow_binding_publish", args)


async def get(client: McpTestClient, tool_id: str) -> dict[str, Any]:
    """Call workflow_binding_get for a Tool; its structured output."""
    return ok(await client.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool_id}))


async def decide(
    client: McpTestClient, receipt: dict[str, Any], decision: str, comment: str | None = None
) -> dict[str, Any]:
    """Call workflow_binding_decide on the revision of a publish receipt."""
    args: dict[str, Any] = {
        "hostId": HOST,
        "bindingId": receipt["bindingId"],
        "expectedBindingDigest": receipt["bindingDigest"],
        "decision": decision,
        "operationId": new_id(),
    }
    if comment is not None:
        args["comment"] = comment
    return await client.call_tool("workflow_binding_decide", args)
