"""Tool binding revisions and owner approval through POST /mcp (seed 000 checklist)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from runtime.canonical import definition_digest
from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.binding_builders import (
    ASK_TASK,
    AUTHOR,
    HOST,
    OWNER,
    binding,
    definition_yaml,
    endpoint_target,
    insert_version_row,
    new_id,
    publish_args,
    write_binding,
)
from tests.support.binding_mcp import (
    Actors,
    actors_of,
    decide,
    get,
    ok,
    publish,
    publish_definition_text,
    refused,
)
from tests.support.mcp import MODERN, McpTestClient
from tests.support.publication import versioned
from tests.support.tokens import auth_headers

pytestmark = pytest.mark.requirement("000:Workflow owner approval")


@pytest.fixture
def actors(http: httpx.AsyncClient, dev_identity: DevIdentity) -> Actors:
    return actors_of(http, dev_identity)


async def definition(
    actors: Actors,
    wf_def_id: str | None = None,
    version: str = "1.2.0",
    *,
    approval: str = "carryOver",
    **options: Any,
) -> tuple[str, str]:
    """Save the owner's head (first time) and publish a version; returns (wfDefId, text)."""
    text = versioned(definition_yaml(**options), version)
    wf_def_id = await publish_definition_text(
        actors.owner, text, wf_def_id, version, approval=approval
    )
    return wf_def_id, text


async def test_a_revision_by_someone_else_is_pending_until_the_owner_approves_the_digest(
    actors: Actors,
) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    pending = ok(await publish(actors.author, publish_args(binding(wf_def_id, tool_id, text), 0)))
    assert pending["status"] == "pendingApproval"
    assert "carryOverDeniedReason" in pending
    # The author cannot approve; the owner must name the reviewed digest.
    refused(await decide(actors.author, pending, "approve"), "WORKFLOW_POLICY_DENIED")
    wrong = {**pending, "bindingDigest": "sha256:" + "0" * 64}
    refused(await decide(actors.owner, wrong, "approve"), "WORKFLOW_DEFINITION_MISMATCH")
    approved = ok(await decide(actors.owner, pending, "approve", "fine"))
    assert approved["status"] == "active"
    state = await get(actors.owner, tool_id)
    assert state["activeBindingId"] == pending["bindingId"]
    assert state["revision"]["status"] == "active"


async def test_the_owner_publishing_is_active_by_self_approval(actors: Actors) -> None:
    wf_def_id, text = await definition(actors)
    receipt = ok(await publish(actors.owner, publish_args(binding(wf_def_id, new_id(), text), 0)))
    assert (receipt["result"], receipt["status"], receipt["aggregateVersion"]) == (
        "published",
        "active",
        1,
    )
    assert "decisionId" in receipt
    assert "carryOverDeniedReason" not in receipt


async def test_a_name_only_change_keeps_approval_active(actors: Actors) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    first = ok(await publish(actors.owner, publish_args(binding(wf_def_id, tool_id, text), 0)))
    renamed = binding(wf_def_id, tool_id, text, toolName="claims.summarize-v2")
    second = ok(await publish(actors.author, publish_args(renamed, first["aggregateVersion"])))
    assert second["status"] == "active"
    assert second["approvalDigest"] == first["approvalDigest"]
    assert second["bindingDigest"] != first["bindingDigest"]


async def test_a_deadline_change_makes_a_pending_revision_while_the_previous_keeps_serving(
    actors: Actors,
) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    first = ok(await publish(actors.owner, publish_args(binding(wf_def_id, tool_id, text), 0)))
    slower = binding(wf_def_id, tool_id, text, totalDeadlineMs=25000)
    second = ok(await publish(actors.author, publish_args(slower, first["aggregateVersion"])))
    assert second["status"] == "pendingApproval"
    assert second["carryOverDeniedReason"] == "approvalDigest differs from the active revision's"
    state = await get(actors.owner, tool_id)
    assert state["activeBindingId"] == first["bindingId"]
    assert state["pendingBindingId"] == second["bindingId"]
    assert state["activeRevision"]["bindingId"] == first["bindingId"]


async def test_re_pinning_to_a_new_version_with_unchanged_fields_stays_active(
    actors: Actors,
) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    first = ok(await publish(actors.owner, publish_args(binding(wf_def_id, tool_id, text), 0)))
    _, text2 = await definition(actors, wf_def_id, "1.3.0", marker=2)
    repinned = binding(wf_def_id, tool_id, text2, version="1.3.0")
    second = ok(await publish(actors.author, publish_args(repinned, first["aggregateVersion"])))
    assert second["status"] == "active"
    assert second["workflowVersion"] == "1.3.0"


async def test_a_version_exceeding_maximum_parallelism_is_rejected_at_publish(
    actors: Actors,
) -> None:
    wf_def_id, text = await definition(actors, fork_width=6)
    error = refused(
        await publish(actors.owner, publish_args(binding(wf_def_id, new_id(), text), 0)),
        "WORKFLOW_INPUT_INVALID",
    )
    assert "maximumParallelism" in error["message"]
    # State-dependent: listed in details.problems, but no request-validation evidence.
    assert "requestValidation" not in error["details"]


async def test_a_version_published_with_reapprove_sends_the_revision_to_the_owner(
    actors: Actors,
) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    first = ok(await publish(actors.owner, publish_args(binding(wf_def_id, tool_id, text), 0)))
    _, text2 = await definition(actors, wf_def_id, "1.3.0", approval="reapprove", marker=2)
    repinned = binding(wf_def_id, tool_id, text2, version="1.3.0")
    second = ok(await publish(actors.author, publish_args(repinned, first["aggregateVersion"])))
    assert second["status"] == "pendingApproval"
    assert "reapprove" in second["carryOverDeniedReason"]


async def test_an_async_binding_is_rejected_with_binding_fields_evidence(actors: Actors) -> None:
    wf_def_id, text = await definition(actors)
    args = publish_args(binding(wf_def_id, new_id(), text, invocationMode="async"), 0)
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert error["afterEffect"] is False
    assert error["details"]["requestValidation"] == {
        "version": 2,
        "discriminator": "bindingFields",
        "operationId": args["operationId"],
        "toolName": "workflow_binding_publish",
        "requestSection": "binding",
    }
    # The stored rejection replays unchanged.
    replay = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert replay == error


def _evidence(args: dict[str, Any], section: str) -> dict[str, Any]:
    discriminator = {"binding": "bindingFields", "reach": "bindingReach"}[section]
    return {
        "version": 2,
        "discriminator": discriminator,
        "operationId": args["operationId"],
        "toolName": "workflow_binding_publish",
        "requestSection": section,
    }


@pytest.mark.parametrize(
    ("change", "section"),
    [
        ({"binding": {"toolName": "not a tool name"}}, "binding"),
        ({"binding": {"cancellationPolicy": "BEFORE_EFFECTS_ONLY"}}, "binding"),
        ({"binding": {"unknownMember": 1}}, "binding"),
        ({"dependencies": [{"nestedToolId": "x"}]}, "reach"),
        (
            {"endpointTargets": [{**endpoint_target(), "authorizationPolicyDigest": "md5:x"}]},
            "reach",
        ),
    ],
)
async def test_a_schema_invalid_section_is_stored_with_its_evidence(
    actors: Actors, change: dict[str, Any], section: str
) -> None:
    """The catalog validator's failure path names the section; the rejection is stored."""
    wf_def_id, text = await definition(actors)
    args = publish_args(binding(wf_def_id, new_id(), text), 0)
    for key, value in change.items():
        args[key] = {**args[key], **value} if isinstance(value, dict) else value
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert error["afterEffect"] is False
    assert error["details"]["requestValidation"] == _evidence(args, section)
    replay = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert replay == error


async def test_a_negative_version_wins_over_a_schema_invalid_binding(actors: Actors) -> None:
    """Version 1 evidence comes first, as for a schema-valid binding (rules in order)."""
    wf_def_id, text = await definition(actors)
    args = publish_args(binding(wf_def_id, new_id(), text, toolName="not a tool name"), -1)
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert error["details"]["requestValidation"]["discriminator"] == (
        "negativeExpectedAggregateVersion"
    )


@pytest.mark.parametrize(
    "change",
    [
        {"binding": "not an object"},  # the section is not present with its contract type
        {"operationId": "not-a-uuid"},  # the operation cannot be identified and fenced
        {"extra": True},  # outside both sections
    ],
)
async def test_a_schema_failure_outside_a_fenced_section_carries_no_evidence(
    actors: Actors, change: dict[str, Any]
) -> None:
    wf_def_id, text = await definition(actors)
    args = {**publish_args(binding(wf_def_id, new_id(), text), 0), **change}
    if "operationId" in change:  # the binding fails too, but no operation can hold it
        args["binding"] = {**args["binding"], "toolName": "not a tool name"}
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert "requestValidation" not in error.get("details", {})


async def test_a_human_task_binding_is_rejected(actors: Actors, db: Database) -> None:
    wf_def_id, _ = await definition(actors)
    human = definition_yaml(extra_task=ASK_TASK)
    await insert_version_row(db, wf_def_id, human, version="9.0.0")
    args = publish_args(binding(wf_def_id, new_id(), human, version="9.0.0"), 0)
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert error["message"] == "task approve of kind ask cannot run in a sync Tool"


async def test_a_write_tool_with_a_short_replay_window_is_rejected(actors: Actors) -> None:
    wf_def_id, text = await definition(actors, write=True)
    value = write_binding(wf_def_id, new_id(), text)
    value["idempotencyPolicy"] = {"kind": "derived", "resultReplayMs": 599999}
    args = publish_args(value, 0, endpoint_targets=[endpoint_target()])
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert "600000" in error["message"]
    assert error["details"]["requestValidation"]["discriminator"] == "bindingFields"


async def test_a_read_only_tool_reaching_a_write_is_rejected(actors: Actors) -> None:
    wf_def_id, text = await definition(actors, write=True)
    args = publish_args(binding(wf_def_id, new_id(), text), 0, endpoint_targets=[endpoint_target()])
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert "read-only Tool claims.summarize reaches the write task" in error["message"]
    assert "save" in error["message"]


async def test_a_write_tool_with_evidence_is_admitted(actors: Actors) -> None:
    wf_def_id, text = await definition(actors, write=True)
    args = publish_args(
        write_binding(wf_def_id, new_id(), text), 0, endpoint_targets=[endpoint_target()]
    )
    receipt = ok(await publish(actors.owner, args))
    assert receipt["status"] == "active"
    state = await get(actors.owner, receipt["toolId"])
    assert [task["taskName"] for task in state["revision"]["writeTasks"]] == ["save"]


async def test_a_definition_version_cannot_be_retired_while_an_active_revision_pins_it(
    actors: Actors,
) -> None:
    wf_def_id, text = await definition(actors)
    ok(await publish(actors.owner, publish_args(binding(wf_def_id, new_id(), text), 0)))
    retire = {"hostId": HOST, "wfDefId": wf_def_id, "version": "1.2.0", "operationId": new_id()}
    refused(
        await actors.owner.call_tool("workflow_definition_retire", retire),
        "WORKFLOW_STATE_CONFLICT",
    )


async def test_retiring_a_version_withdraws_its_pending_revisions(actors: Actors) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    pending = ok(await publish(actors.author, publish_args(binding(wf_def_id, tool_id, text), 0)))
    retire = {"hostId": HOST, "wfDefId": wf_def_id, "version": "1.2.0", "operationId": new_id()}
    retired = ok(await actors.owner.call_tool("workflow_definition_retire", retire))
    assert retired["withdrawnBindingIds"] == [pending["bindingId"]]
    state = await get(actors.owner, tool_id)
    actions = [decision["action"] for decision in state["decisions"]]
    assert "withdraw" in actions
    assert state["revision"]["status"] == "withdrawn"
    assert state["aggregateVersion"] == 2


async def test_revoke_and_retire_of_a_tool(actors: Actors) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    active = ok(await publish(actors.owner, publish_args(binding(wf_def_id, tool_id, text), 0)))
    revoke = {
        "hostId": HOST,
        "bindingId": active["bindingId"],
        "expectedBindingDigest": active["bindingDigest"],
        "comment": "no longer approved",
        "operationId": new_id(),
    }
    refused(
        await actors.author.call_tool("workflow_binding_revoke", revoke), "WORKFLOW_POLICY_DENIED"
    )
    revoked = ok(await actors.owner.call_tool("workflow_binding_revoke", revoke))
    assert revoked["status"] == "revoked"
    retire = {
        "hostId": HOST,
        "toolId": tool_id,
        "expectedAggregateVersion": revoked["aggregateVersion"] + 5,
        "operationId": new_id(),
    }
    refused(await actors.author.call_tool("workflow_binding_retire", retire), "VERSION_CONFLICT")


async def test_a_negative_expected_version_carries_version_one_evidence(actors: Actors) -> None:
    wf_def_id, text = await definition(actors)
    args = publish_args(binding(wf_def_id, new_id(), text), -1)
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert error["details"]["requestValidation"] == {
        "version": 1,
        "discriminator": "negativeExpectedAggregateVersion",
        "operationId": args["operationId"],
        "toolName": "workflow_binding_publish",
    }


async def test_list_shows_pending_counts_to_the_owner(actors: Actors) -> None:
    wf_def_id, text = await definition(actors)
    ok(await publish(actors.author, publish_args(binding(wf_def_id, new_id(), text), 0)))
    listed = ok(
        await actors.owner.call_tool(
            "workflow_binding_list", {"hostId": HOST, "role": "owner", "wfDefId": wf_def_id}
        )
    )
    assert len(listed["items"]) == 1
    mine = ok(
        await actors.author.call_tool(
            "workflow_binding_list", {"hostId": HOST, "role": "requester"}
        )
    )
    assert len(mine["items"]) == 1


@pytest.mark.requirement("000:Concurrency")
async def test_thirty_racing_publishes_leave_one_active_and_at_most_one_pending(
    actors: Actors, db: Database
) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()

    async def one(index: int) -> dict[str, Any]:
        value = binding(wf_def_id, tool_id, text, totalDeadlineMs=20000 + index)
        client = actors.owner if index % 3 == 0 else actors.author
        # Each publisher retries on VERSION_CONFLICT after reading the head, as the Portal does.
        for _ in range(60):
            head = await actors.owner.call_tool(
                "workflow_binding_get", {"hostId": HOST, "toolId": tool_id}
            )
            expected = 0 if head["isError"] else head["structuredContent"]["aggregateVersion"]
            result = await publish(client, publish_args(value, expected))
            if not result["isError"]:
                return dict(result["structuredContent"])
            assert result["structuredContent"]["error"]["code"] == "VERSION_CONFLICT"
        raise AssertionError("publish never won the head")

    receipts = await asyncio.gather(*(one(i) for i in range(30)))
    versions = sorted(receipt["aggregateVersion"] for receipt in receipts)
    assert versions == list(range(1, 31))
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT revision_status, count(*) AS n FROM workflow_tool_binding_t"
            " WHERE tool_id = %s GROUP BY revision_status",
            (tool_id,),
        )
        counts = {row["revision_status"]: row["n"] for row in await cursor.fetchall()}
        cursor = await conn.execute(
            "SELECT aggregate_version FROM workflow_tool_publication_t WHERE tool_id = %s",
            (tool_id,),
        )
        head = await cursor.fetchone()
    assert counts.get("approved", 0) == 1
    assert counts.get("pendingApproval", 0) <= 1
    assert head is not None and head["aggregate_version"] == 30


async def test_list_pages_default_to_25_and_refuse_more_than_100(actors: Actors) -> None:
    wf_def_id, text = await definition(actors)
    for _ in range(26):
        ok(await publish(actors.author, publish_args(binding(wf_def_id, new_id(), text), 0)))
    query = {"hostId": HOST, "role": "owner", "wfDefId": wf_def_id}
    first = ok(await actors.owner.call_tool("workflow_binding_list", query))
    assert len(first["items"]) == 25
    assert first["pendingCount"] == 26
    second = ok(
        await actors.owner.call_tool(
            "workflow_binding_list", {**query, "cursor": first["nextCursor"]}
        )
    )
    assert len(second["items"]) == 1
    assert "nextCursor" not in second
    too_many = await actors.owner.call_tool("workflow_binding_list", {**query, "limit": 101})
    refused(too_many, "WORKFLOW_INPUT_INVALID")


async def test_an_owner_change_by_save_moves_pending_revisions_and_keeps_approvals(
    actors: Actors, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    wf_def_id, text = await definition(actors)
    active_tool, pending_tool = new_id(), new_id()
    active = ok(await publish(actors.owner, publish_args(binding(wf_def_id, active_tool, text), 0)))
    pending = ok(
        await publish(actors.author, publish_args(binding(wf_def_id, pending_tool, text), 0))
    )
    transfer = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "sourceRevision": 2,
        "actor": "steve",
        "namespace": "claims",
        "name": "summarize-claim",
        "version": "1.2.0",
        "definition": definition_yaml(),
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": False,
        "owner": {"userId": "owner-2", "positionId": "pos-2"},
        "active": True,
    }
    ok(await actors.owner.call_tool("workflow_definition_save", transfer))
    new_owner = McpTestClient(
        http,
        MODERN,
        auth_headers(
            dev_identity,
            dev_identity.user_token(host_id=HOST, user_id="owner-2", roles=("admin",)),
            dev_identity.app_token(host_id=HOST),
        ),
    )
    # The pending revision now names the new owner; the approved one keeps its approver.
    assert (await get(new_owner, pending_tool))["revision"]["owner"]["userId"] == "owner-2"
    assert (await get(new_owner, active_tool))["revision"]["owner"]["userId"] == OWNER
    refused(await decide(actors.owner, pending, "approve"), "WORKFLOW_POLICY_DENIED")
    assert ok(await decide(new_owner, pending, "approve"))["status"] == "active"
    assert (await get(new_owner, active_tool))["activeBindingId"] == active["bindingId"]


async def test_workflow_refuses_an_endpoint_target_outside_its_destination_policy(
    actors: Actors, services: Services
) -> None:
    services.settings.publication.destinations.allowed_hosts = ["api.example.com"]
    wf_def_id, text = await definition(actors, write=True)
    outside = endpoint_target(ref="evil", uri="https://evil.example.net/claims")
    targets = [endpoint_target(), outside]  # the call is covered: the policy is all that is wrong
    args = publish_args(write_binding(wf_def_id, new_id(), text), 0, endpoint_targets=targets)
    error = refused(await publish(actors.owner, args), "WORKFLOW_POLICY_DENIED")
    assert "destination policy" in error["message"]
    inside = publish_args(
        write_binding(wf_def_id, new_id(), text), 0, endpoint_targets=[endpoint_target()]
    )
    assert ok(await publish(actors.owner, inside))["status"] == "active"


async def test_reject_requires_a_comment(actors: Actors) -> None:
    wf_def_id, text = await definition(actors)
    pending = ok(await publish(actors.author, publish_args(binding(wf_def_id, new_id(), text), 0)))
    refused(await decide(actors.owner, pending, "reject"), "WORKFLOW_INPUT_INVALID")
    rejected = ok(await decide(actors.owner, pending, "reject", "too slow for this Tool"))
    assert rejected["status"] == "rejected"


def third_party(http: httpx.AsyncClient, dev_identity: DevIdentity, user_id: str) -> McpTestClient:
    """An MCP client for another reviewer of the same host (who may not retire Tools)."""
    user = dev_identity.user_token(host_id=HOST, user_id=user_id, roles=("workflow-admin",))
    app = dev_identity.app_token(host_id=HOST)
    return McpTestClient(http, MODERN, auth_headers(dev_identity, user, app))


async def test_a_publisher_naming_themselves_owner_without_a_saved_head_cannot_self_approve(
    actors: Actors, db: Database
) -> None:
    wf_def_id, text = new_id(), definition_yaml()
    version = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "namespace": "claims",
        "name": "summarize-claim",
        "version": "1.2.0",
        "definition": text,
        "expectedDefinitionDigest": definition_digest(text),
        "bindingApproval": "carryOver",
        "owner": {"userId": AUTHOR},
        "operationId": new_id(),
    }
    ok(await actors.author.call_tool("workflow_definition_publish", version))
    args = publish_args(binding(wf_def_id, new_id(), text), 0)
    error = refused(await publish(actors.author, args), "WORKFLOW_STATE_CONFLICT")
    assert "saved head" in error["message"]
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT count(*) AS n FROM workflow_tool_binding_t WHERE wf_def_id = %s", (wf_def_id,)
        )
        row = await cursor.fetchone()
    assert row is not None and row["n"] == 0
    # The refusal is not stored: a retry after the owner saves the head runs afresh.
    listed = ok(
        await actors.author.call_tool(
            "workflow_binding_list", {"hostId": HOST, "role": "owner", "wfDefId": wf_def_id}
        )
    )
    assert listed["items"] == []


async def test_binding_get_serves_the_owner_and_requesters_and_hides_the_tool_from_others(
    actors: Actors, http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    ok(await publish(actors.author, publish_args(binding(wf_def_id, tool_id, text), 0)))
    assert (await get(actors.owner, tool_id))["toolId"] == tool_id
    assert (await get(actors.author, tool_id))["toolId"] == tool_id
    stranger = third_party(http, dev_identity, "stranger-1")
    hidden = await stranger.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool_id})
    unknown = await stranger.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": new_id()})
    assert refused(hidden, "WORKFLOW_NOT_FOUND") == refused(unknown, "WORKFLOW_NOT_FOUND")


async def test_retiring_a_tool_retires_the_active_and_withdraws_the_pending_revision(
    actors: Actors,
) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    active = ok(await publish(actors.owner, publish_args(binding(wf_def_id, tool_id, text), 0)))
    slower = binding(wf_def_id, tool_id, text, totalDeadlineMs=25000)
    pending = ok(await publish(actors.author, publish_args(slower, active["aggregateVersion"])))
    assert pending["status"] == "pendingApproval"
    retire = {
        "hostId": HOST,
        "toolId": tool_id,
        "expectedAggregateVersion": pending["aggregateVersion"],
        "comment": "the Tool is gone",
        "operationId": new_id(),
    }
    retired = ok(await actors.author.call_tool("workflow_binding_retire", retire))
    assert retired["result"] == "retired"
    assert retired["retiredBindingId"] == active["bindingId"]
    assert retired["withdrawnBindingId"] == pending["bindingId"]
    state = await get(actors.owner, tool_id)
    assert "activeBindingId" not in state and "pendingBindingId" not in state
    by_binding = {(d["bindingId"], d["action"]) for d in state["decisions"]}
    assert (active["bindingId"], "retire") in by_binding
    assert (pending["bindingId"], "withdraw") in by_binding
    shown = await actors.owner.call_tool(
        "workflow_binding_get",
        {"hostId": HOST, "toolId": tool_id, "bindingId": active["bindingId"]},
    )
    assert ok(shown)["revision"]["status"] == "retired"


async def test_approve_revalidates_endpoint_targets_against_the_current_destination_policy(
    actors: Actors, services: Services
) -> None:
    wf_def_id, text = await definition(actors, write=True)
    args = publish_args(
        write_binding(wf_def_id, new_id(), text), 0, endpoint_targets=[endpoint_target()]
    )
    pending = ok(await publish(actors.author, args))
    assert pending["status"] == "pendingApproval"
    services.settings.publication.destinations.allowed_hosts = ["other.example.org"]
    error = refused(await decide(actors.owner, pending, "approve"), "WORKFLOW_POLICY_DENIED")
    assert "destination policy" in error["message"]
    state = await get(actors.owner, pending["toolId"])
    assert state["revision"]["status"] == "pendingApproval"


async def test_activating_a_write_tool_stores_one_evidence_row_per_write_task(
    actors: Actors, db: Database
) -> None:
    second_write = (
        "  - archive:\n      call: http\n      with:\n        method: PUT\n"
        "        endpoint: https://api.example.com/archive\n"
        "      metadata:\n        approvalEvidenceDigest: sha256:" + "d" * 64 + "\n"
    )
    wf_def_id, text = await definition(actors, write=True, extra_task=second_write)
    archive = endpoint_target(ref="archive-api", uri="https://api.example.com/archive")
    archive["allowedMethods"] = ["PUT"]
    targets = [endpoint_target(), archive]
    args = publish_args(write_binding(wf_def_id, new_id(), text), 0, endpoint_targets=targets)
    receipt = ok(await publish(actors.owner, args))
    assert receipt["status"] == "active"
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT task_name, evidence_digest, approved_by"
            " FROM workflow_tool_approval_evidence_t WHERE binding_id = %s ORDER BY task_name",
            (receipt["bindingId"],),
        )
        rows = await cursor.fetchall()
    assert [(row["task_name"], row["approved_by"]) for row in rows] == [
        ("archive", OWNER),
        ("save", OWNER),
    ]
    assert rows[0]["evidence_digest"] == "sha256:" + "d" * 64


@pytest.mark.parametrize("field", ["definitionDigest", "schemaDigest"])
async def test_a_binding_whose_digest_differs_from_the_published_version_is_refused(
    actors: Actors, field: str
) -> None:
    wf_def_id, text = await definition(actors)
    tool_id = new_id()
    value = binding(wf_def_id, tool_id, text)
    published = {
        "definitionDigest": value["definitionDigest"],
        "schemaDigest": value["schemaDigest"],
    }
    value[field] = "sha256:" + "0" * 64
    error = refused(
        await publish(actors.owner, publish_args(value, 0)), "WORKFLOW_DEFINITION_MISMATCH"
    )
    # The answer names what the pinned version really holds, and nothing was recorded.
    assert error["details"] == published
    lookup = {"hostId": HOST, "toolId": tool_id}
    refused(await actors.owner.call_tool("workflow_binding_get", lookup), "WORKFLOW_NOT_FOUND")
