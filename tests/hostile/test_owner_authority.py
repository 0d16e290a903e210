"""A definition version the owner did not publish never inherits the owner's approval."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from runtime.canonical import definition_digest
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import (
    AUTHOR,
    HOST,
    OWNER,
    OWNER_POSITION,
    binding,
    definition_yaml,
    new_id,
    publish_args,
)
from tests.support.hostile import assert_responsive, while_probing
from tests.support.invocation import client, ok, save_head
from tests.support.mcp import McpTestClient
from tests.support.publication import versioned

pytestmark = pytest.mark.requirement("000:Carry-over")

NOT_THE_OWNERS = "the definition version was published by someone other than the definition owner"


async def publish_version_as(
    publisher: McpTestClient, wf_def_id: str, text: str, version: str
) -> None:
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
    ok(await publisher.call_tool("workflow_definition_publish", args))


async def approved_tool(owner: McpTestClient) -> tuple[str, str, dict[str, Any]]:
    wf_def_id, tool_id, text = new_id(), new_id(), definition_yaml()
    await save_head(owner, wf_def_id, text)
    await publish_version_as(owner, wf_def_id, text, "1.2.0")
    first = ok(
        await owner.call_tool(
            "workflow_binding_publish", publish_args(binding(wf_def_id, tool_id, text), 0)
        )
    )
    assert first["status"] == "active"
    return wf_def_id, tool_id, first


async def test_a_repin_to_a_version_published_by_someone_else_goes_to_the_owner(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    owner = client(http, dev_identity, OWNER)
    author = client(http, dev_identity, AUTHOR)
    wf_def_id, tool_id, first = await approved_tool(owner)
    new_logic = versioned(definition_yaml(marker=2), "1.3.0")
    await publish_version_as(author, wf_def_id, new_logic, "1.3.0")
    repinned = binding(wf_def_id, tool_id, new_logic, version="1.3.0")
    probed = await while_probing(
        http,
        author.call_tool(
            "workflow_binding_publish", publish_args(repinned, first["aggregateVersion"])
        ),
    )
    receipt = ok(probed.result)
    assert receipt["status"] == "pendingApproval"
    assert receipt["carryOverDeniedReason"] == NOT_THE_OWNERS
    assert "decisionId" not in receipt
    assert_responsive(probed)
    head = ok(await owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool_id}))
    # The owner's approved revision keeps serving; the new logic waits for the owner.
    assert head["activeBindingId"] == first["bindingId"]
    assert head["pendingBindingId"] == receipt["bindingId"]


async def test_a_repin_to_the_owners_own_new_version_still_carries_over(
    http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    owner = client(http, dev_identity, OWNER)
    author = client(http, dev_identity, AUTHOR)
    wf_def_id, tool_id, first = await approved_tool(owner)
    new_logic = versioned(definition_yaml(marker=2), "1.3.0")
    await publish_version_as(owner, wf_def_id, new_logic, "1.3.0")
    repinned = binding(wf_def_id, tool_id, new_logic, version="1.3.0")
    receipt = ok(
        await author.call_tool(
            "workflow_binding_publish", publish_args(repinned, first["aggregateVersion"])
        )
    )
    assert receipt["status"] == "active"
    assert "carryOverDeniedReason" not in receipt
