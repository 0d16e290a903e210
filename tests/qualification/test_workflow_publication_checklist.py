"""Seed 000 Qualification Checklist, publication items, against the live service.

The owner and a Tool author publish over HTTP as the Portal does through the Gateway (user
bearer in Authorization, the Gateway's application bearer in X-Scope-Token); what they observe
is the receipts and errors, what a later call runs, and what the database holds.
"""

from __future__ import annotations

import httpx
import pytest

from runtime.canonical import definition_digest
from tests.support.binding_builders import (
    ASK_TASK,
    HOST,
    binding,
    definition_yaml,
    endpoint_target,
    new_id,
    publish_args,
    write_binding,
)
from tests.support.binding_mcp import Actors, actors_of, publish, publish_definition_text, refused
from tests.support.invocation import ok, publish_version, save_head
from tests.support.live_publication import (
    invoke_pinned,
    publish_with_reapprove,
    save_text,
    stored_rows,
)
from tests.support.live_stack import QualStack
from tests.support.live_tools import (
    get_definition,
    invoke,
    post_definition,
    publish_live_tool,
    runs_of,
)
from tests.support.mcp import MODERN, McpTestClient
from tests.support.publication import versioned
from tests.support.publication_builders import (
    OTHER_HOST,
    grant,
    grants_args,
    save_args,
)
from tests.support.publication_builders import (
    publish_args as definition_publish_args,
)
from tests.support.scale_out import scalar
from tests.support.tokens import auth_headers

pytestmark = [pytest.mark.requirement("000:Qualification Checklist"), pytest.mark.timeout(60)]


@pytest.fixture
def actors(live_http: httpx.AsyncClient, qual_stack: QualStack) -> Actors:
    """The definition owner and a Tool author of the same host, over HTTP."""
    return actors_of(live_http, qual_stack.identity)


async def test_item_08_a_publication_call_without_valid_tokens_or_for_another_host_is_refused(
    qual_stack: QualStack, live_http: httpx.AsyncClient
) -> None:
    """08: "A publication call without a valid user Authorization or Gateway X-Scope-Token is
    refused before storage access. A mismatched host is refused." """
    identity = qual_stack.identity
    user = identity.user_token(host_id=HOST, roles=("workflow-admin",))
    app = identity.app_token(host_id=HOST)
    stranger_app = identity.app_token(host_id=HOST, service_id="not-the-gateway")
    bad_headers = {
        "no user bearer": {"X-Scope-Token": f"Bearer {app}"},
        "no Gateway bearer": {"Authorization": f"Bearer {user}"},
        "user bearer of another audience": auth_headers(
            identity, identity.user_token(host_id=HOST, audience="another-service"), app
        ),
        "Gateway bearer in Authorization": auth_headers(identity, app, app),
        "scope token of a service that is not an allowed caller": auth_headers(
            identity, user, stranger_app
        ),
        "another host's user bearer": auth_headers(
            identity, identity.user_token(host_id=OTHER_HOST, roles=("workflow-admin",)), app
        ),
    }
    for case, headers in bad_headers.items():
        wf_def_id = new_id()
        save = save_args(wf_def_id, 1)
        version_args = definition_publish_args(wf_def_id)
        bare = McpTestClient(live_http, MODERN, headers)
        for tool, args in (
            ("workflow_definition_save", save),
            ("workflow_definition_publish", version_args),
        ):
            result = await bare.call_tool(tool, args)
            assert result["isError"] is True, (case, result)
            error = result["structuredContent"]["error"]
            assert error["code"] == "WORKFLOW_POLICY_DENIED", (case, error)
            assert user.split(".")[1] not in str(result) and app.split(".")[1] not in str(result)
        assert set(
            (await stored_rows(qual_stack, wf_def_id, version_args["operationId"])).values()
        ) == {0}, case
    # Valid tokens of this host naming another host in hostId: refused the same way.
    mine = McpTestClient(live_http, MODERN, auth_headers(identity, user, app))
    wf_def_id = new_id()
    mismatched = definition_publish_args(wf_def_id, hostId=OTHER_HOST)
    refused(
        await mine.call_tool("workflow_definition_publish", mismatched), "WORKFLOW_POLICY_DENIED"
    )
    refused(
        await mine.call_tool(
            "workflow_definition_save", save_args(wf_def_id, 1, hostId=OTHER_HOST)
        ),
        "WORKFLOW_POLICY_DENIED",
    )
    assert set((await stored_rows(qual_stack, wf_def_id, mismatched["operationId"])).values()) == {
        0
    }


async def test_item_09_a_delayed_save_or_grant_set_with_a_lower_source_revision_is_stale(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """09: "A delayed save or grant set with a lower sourceRevision returns stale and changes
    nothing." """
    wf_def_id = new_id()
    newer = definition_yaml(marker=2)
    ok(await owner.call_tool("workflow_definition_save", save_text(wf_def_id, 2, newer)))
    delayed = save_text(wf_def_id, 1, definition_yaml(marker=1), active=False)
    stale = ok(await owner.call_tool("workflow_definition_save", delayed))
    assert stale["result"] == "stale"
    assert (stale["appliedRevision"], stale["definitionDigest"]) == (2, definition_digest(newer))
    # The head still runs revision 2's text, and is still active.
    started = ok(await caller.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": {}}))
    instance = {"workflowInstanceId": started["workflowInstanceId"]}
    assert ok(await caller.call_tool("workflow_wait_result", instance))["output"]["marker"] == 2

    kept = [grant("q09-kept", "q09-tool")]
    saved = ok(
        await owner.call_tool("workflow_definition_grants_sync", grants_args(wf_def_id, 5, kept))
    )
    restoring = grants_args(wf_def_id, 4, [*kept, grant("q09-removed", "q09-tool")])
    late = ok(await owner.call_tool("workflow_definition_grants_sync", restoring))
    assert late == {**saved, "result": "stale"}
    sql = "SELECT count(*) FROM workflow_tool_grant_t WHERE wf_def_id = %s"
    assert await qual_stack.count(sql, wf_def_id) == 1


async def test_item_14_unchanged_republish_operation_conflict_and_new_digest_rejection(
    qual_stack: QualStack, owner: McpTestClient
) -> None:
    """14: "Publishing the same payload twice returns unchanged. Reusing an operationId with a
    different payload is a conflict. Publishing a new digest for a published version is
    rejected." """
    wf_def_id = new_id()
    ok(await owner.call_tool("workflow_definition_save", save_args(wf_def_id, 1)))
    first_args = definition_publish_args(wf_def_id)
    first = ok(await owner.call_tool("workflow_definition_publish", first_args))
    assert first["result"] == "published"
    again = ok(
        await owner.call_tool(
            "workflow_definition_publish", {**first_args, "operationId": new_id()}
        )
    )
    assert again["result"] == "unchanged"
    assert again["definitionDigest"] == first["definitionDigest"]
    # The same operation id with another payload: a conflict, nothing published.
    other = definition_publish_args(wf_def_id, "1.3.0", operationId=first_args["operationId"])
    refused(
        await owner.call_tool("workflow_definition_publish", other), "WORKFLOW_IDEMPOTENCY_CONFLICT"
    )
    # A new text under the published version: a mismatch, the stored version is untouched.
    changed = definition_publish_args(wf_def_id, marker=9)
    refused(
        await owner.call_tool("workflow_definition_publish", changed),
        "WORKFLOW_DEFINITION_MISMATCH",
    )
    sql = "SELECT definition_digest FROM wf_definition_version_t WHERE wf_def_id = %s"
    assert await scalar(qual_stack.database_url, sql, wf_def_id) == first["definitionDigest"]
    versions = "SELECT count(*) FROM wf_definition_version_t WHERE wf_def_id = %s"
    assert await qual_stack.count(versions, wf_def_id) == 1


async def test_item_16_a_retired_version_refuses_new_runs_and_cannot_be_retired_while_pinned(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """16: "A retired definition version refuses new runs and cannot be retired while an
    active revision pins it." """
    uri = qual_stack.unique_path("item16")
    tool = await publish_live_tool(owner, get_definition(uri), (uri,))
    retire = {"hostId": HOST, "wfDefId": tool.wf_def_id, "version": "1.2.0"}
    refused(
        await owner.call_tool("workflow_definition_retire", {**retire, "operationId": new_id()}),
        "WORKFLOW_STATE_CONFLICT",
    )
    ok(await invoke(caller, tool))  # still serving
    # The author retires the Tool; then the version can be retired.
    retire_tool = {
        "hostId": HOST,
        "toolId": tool.tool_id,
        "expectedAggregateVersion": tool.aggregate_version,
        "operationId": new_id(),
    }
    ok(await owner.call_tool("workflow_binding_retire", retire_tool))
    ok(await owner.call_tool("workflow_definition_retire", {**retire, "operationId": new_id()}))
    runs = await qual_stack.count(*runs_of(tool))
    refused(await invoke(caller, tool), "WORKFLOW_POLICY_DENIED")
    # A new binding pinned to the retired version is refused, so it can never start a run.
    value = binding(tool.wf_def_id, tool.tool_id, tool.text)
    args = publish_args(
        value, tool.aggregate_version + 1, endpoint_targets=[endpoint_target("t0", uri)]
    )
    error = refused(
        await owner.call_tool("workflow_binding_publish", args), "WORKFLOW_DEFINITION_RETIRED"
    )
    assert error["afterEffect"] is False
    assert await qual_stack.count(*runs_of(tool)) == runs


async def test_item_17_starting_an_edited_definition_runs_the_edit_and_a_stale_head_mismatches(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    """17 (Workflow side; the Portal editor is out of scope): "Editing a definition in the
    Portal and starting it, from the definition list or the editor, runs the edited text; a
    stale head returns WORKFLOW_DEFINITION_MISMATCH." """
    wf_def_id = new_id()
    original = await save_head(owner, wf_def_id, definition_yaml(marker=1))
    edited = await save_head(owner, wf_def_id, definition_yaml(marker=2), revision=2)
    start = {"wfDefId": wf_def_id, "input": {}, "expectedDefinitionDigest": edited}
    receipt = ok(await caller.call_tool("workflow_start", start))
    assert receipt["definitionDigest"] == edited
    instance = {"workflowInstanceId": receipt["workflowInstanceId"]}
    assert ok(await caller.call_tool("workflow_wait_result", instance))["output"]["marker"] == 2
    stale = {**start, "expectedDefinitionDigest": original}
    body = refused(await caller.call_tool("workflow_start", stale), "WORKFLOW_DEFINITION_MISMATCH")
    assert body["afterEffect"] is False


async def test_item_23_a_name_change_stays_active_and_a_deadline_change_waits_for_the_owner(
    qual_stack: QualStack, actors: Actors, caller: McpTestClient
) -> None:
    """23: "A name-only change keeps the approved revision active. A deadline change makes a
    new pending revision while the previous one keeps serving." """
    text = definition_yaml()
    wf_def_id = await publish_definition_text(actors.owner, text)
    tool_id = new_id()
    first = ok(await publish(actors.owner, publish_args(binding(wf_def_id, tool_id, text), 0)))
    renamed = binding(wf_def_id, tool_id, text, toolName="claims.summarize-v2")
    second = ok(await publish(actors.author, publish_args(renamed, first["aggregateVersion"])))
    assert second["status"] == "active"
    assert second["approvalDigest"] == first["approvalDigest"]
    slower = binding(
        wf_def_id, tool_id, text, toolName="claims.summarize-v2", totalDeadlineMs=25000
    )
    third = ok(await publish(actors.author, publish_args(slower, second["aggregateVersion"])))
    assert third["status"] == "pendingApproval"
    # The active revision keeps serving calls pinned to its digest; the pending one is refused.
    serving = invoke_pinned(tool_id, second["bindingDigest"], text)
    assert ok(await caller.call_tool("workflow_invoke", serving))["status"] == "completed"
    pending = invoke_pinned(tool_id, third["bindingDigest"], text)
    refused(await caller.call_tool("workflow_invoke", pending), "WORKFLOW_DEFINITION_MISMATCH")


async def test_item_30_an_async_binding_or_a_human_task_is_rejected(
    qual_stack: QualStack, actors: Actors
) -> None:
    """30: "A binding with invocationMode: async or a human task is rejected." """
    text = definition_yaml()
    wf_def_id = await publish_definition_text(actors.owner, text)
    args = publish_args(binding(wf_def_id, new_id(), text, invocationMode="async"), 0)
    error = refused(await publish(actors.owner, args), "WORKFLOW_INPUT_INVALID")
    assert error["details"]["requestValidation"]["discriminator"] == "bindingFields"
    # A definition may hold a human task (workflow_start runs wait for people); a binding
    # that would make it a sync Tool may not.
    human = versioned(definition_yaml(extra_task=ASK_TASK), "2.0.0")
    version = definition_publish_args(wf_def_id, "2.0.0", definition=human)
    version["expectedDefinitionDigest"] = definition_digest(human)
    ok(await actors.owner.call_tool("workflow_definition_publish", version))
    on_human = publish_args(binding(wf_def_id, new_id(), human, version="2.0.0"), 0)
    error = refused(await publish(actors.owner, on_human), "WORKFLOW_INPUT_INVALID")
    assert error["message"] == "task approve of kind ask cannot run in a sync Tool"
    sql = "SELECT count(*) FROM workflow_tool_binding_t WHERE wf_def_id = %s"
    assert await qual_stack.count(sql, wf_def_id) == 0


async def test_item_31_write_tool_replay_window_read_only_reach_and_evidence(
    qual_stack: QualStack, owner: McpTestClient, caller: McpTestClient
) -> None:
    """31: "A write Tool with resultReplayMs below 600000 is rejected. A read-only Tool reaching
    a write is rejected. A write Tool with evidence is admitted." """
    uri = qual_stack.unique_path("item31")
    text = post_definition(uri)
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    await publish_version(owner, wf_def_id, text, "1.2.0")
    targets = [endpoint_target("t0", uri)]
    short = write_binding(wf_def_id, new_id(), text)
    short["idempotencyPolicy"] = {"kind": "derived", "resultReplayMs": 599999}
    error = refused(
        await owner.call_tool(
            "workflow_binding_publish", publish_args(short, 0, endpoint_targets=targets)
        ),
        "WORKFLOW_INPUT_INVALID",
    )
    assert "600000" in error["message"]
    read_only = binding(wf_def_id, new_id(), text)
    error = refused(
        await owner.call_tool(
            "workflow_binding_publish", publish_args(read_only, 0, endpoint_targets=targets)
        ),
        "WORKFLOW_INPUT_INVALID",
    )
    assert "read-only" in error["message"] and "save" in error["message"]
    tool = await publish_live_tool(owner, text, (uri,), write=True)
    done = ok(await invoke(caller, tool))
    assert done["status"] == "completed"
    assert [seen.method for seen in qual_stack.backend.requests_to(uri)] == ["POST"]


async def test_item_33_repin_carry_over_parallelism_limit_and_reapprove(
    qual_stack: QualStack, actors: Actors
) -> None:
    """33: "Re-pinning to a new version with unchanged fields stays active; a version that
    exceeds maximumParallelism is rejected at publish; a version published with reapprove
    sends the revision to the owner." """
    text = definition_yaml()
    wf_def_id = await publish_definition_text(actors.owner, text)
    tool_id = new_id()
    first = ok(await publish(actors.owner, publish_args(binding(wf_def_id, tool_id, text), 0)))
    carried_text = versioned(definition_yaml(marker=2), "1.3.0")
    await publish_definition_text(actors.owner, carried_text, wf_def_id, "1.3.0")
    carried = binding(wf_def_id, tool_id, carried_text, version="1.3.0")
    second = ok(await publish(actors.author, publish_args(carried, first["aggregateVersion"])))
    assert (second["status"], second["workflowVersion"]) == ("active", "1.3.0")

    wide_text = versioned(definition_yaml(fork_width=6), "1.4.0")
    await publish_definition_text(actors.owner, wide_text, wf_def_id, "1.4.0")
    wide = binding(wf_def_id, tool_id, wide_text, version="1.4.0")
    error = refused(
        await publish(actors.author, publish_args(wide, second["aggregateVersion"])),
        "WORKFLOW_INPUT_INVALID",
    )
    assert "maximumParallelism" in error["message"]

    heavier_text = versioned(definition_yaml(marker=3), "1.5.0")
    await publish_with_reapprove(actors.owner, wf_def_id, heavier_text, "1.5.0")
    heavier = binding(wf_def_id, tool_id, heavier_text, version="1.5.0")
    third = ok(await publish(actors.author, publish_args(heavier, second["aggregateVersion"])))
    assert third["status"] == "pendingApproval"
    assert "reapprove" in third["carryOverDeniedReason"]
    state = ok(
        await actors.owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool_id})
    )
    assert state["activeBindingId"] == second["bindingId"]
    assert state["pendingBindingId"] == third["bindingId"]
