"""Definition publication through POST /mcp: save, publish, retire, grants sync, the ledger."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runtime.canonical import definition_digest
from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.mcp import McpTestClient
from tests.support.publication import (
    definition_text,
    grants_args,
    new_id,
    publish_args,
    save_args,
    versioned,
)
from tests.support.tokens import auth_headers

OTHER_HOST = "3f0c9a52-7b1e-4d2a-8e6f-1a2b3c4d5e6f"


def ok(result: dict[str, Any]) -> dict[str, Any]:
    """The structured output of a successful call."""
    assert result["isError"] is False, result
    return dict(result["structuredContent"])


def refused(result: dict[str, Any], code: str) -> dict[str, Any]:
    """The error object of an isError result with that code."""
    assert result["isError"] is True, result
    error = dict(result["structuredContent"]["error"])
    assert error["code"] == code, error
    assert result["content"][0]["text"] == f"{code}: {error['message']}"
    return error


async def scalar(db: Database, sql: str, *params: Any) -> Any:
    """One value from the test database."""
    async with db.connection() as conn:
        cursor = await conn.execute(sql, params)
        row = await cursor.fetchone()
    assert row is not None
    return next(iter(row.values()))


async def save(mcp: McpTestClient, wf_def_id: str, revision: int, **kw: Any) -> dict[str, Any]:
    """Call workflow_definition_save."""
    marker = kw.pop("marker", revision)
    args = save_args(wf_def_id, revision, definition=definition_text(marker), **kw)
    return await mcp.call_tool("workflow_definition_save", args)


@pytest.mark.requirement("000:Saved definitions")
async def test_a_first_save_creates_the_head(mcp: McpTestClient) -> None:
    wf_def_id = new_id()
    receipt = ok(await save(mcp, wf_def_id, 7))
    assert receipt == {
        "result": "saved",
        "wfDefId": wf_def_id,
        "appliedRevision": 7,
        "definitionDigest": definition_digest(definition_text(7)),
        "active": True,
    }


@pytest.mark.requirement("000:Saved definitions")
async def test_a_delayed_older_save_returns_stale_and_changes_nothing(
    mcp: McpTestClient, db: Database
) -> None:
    wf_def_id = new_id()
    ok(await save(mcp, wf_def_id, 5, owner_user_id="owner-new"))
    stale = ok(await save(mcp, wf_def_id, 3, owner_user_id="owner-old", active=False))
    assert stale["result"] == "stale"
    assert stale["appliedRevision"] == 5
    assert stale["definitionDigest"] == definition_digest(definition_text(5))
    owner = await scalar(
        db, "SELECT owner_user_id FROM wf_definition_t WHERE wf_def_id = %s", wf_def_id
    )
    assert owner == "owner-new"
    assert await scalar(db, "SELECT active FROM wf_definition_t WHERE wf_def_id = %s", wf_def_id)
    digest = await scalar(
        db, "SELECT definition_digest FROM wf_definition_t WHERE wf_def_id = %s", wf_def_id
    )
    assert digest == definition_digest(definition_text(5))


@pytest.mark.requirement("000:Saved definitions")
async def test_the_same_revision_and_content_is_unchanged(mcp: McpTestClient) -> None:
    wf_def_id = new_id()
    ok(await save(mcp, wf_def_id, 4))
    again = ok(await save(mcp, wf_def_id, 4))
    assert again["result"] == "unchanged"
    assert again["appliedRevision"] == 4


@pytest.mark.requirement("000:Saved definitions")
@pytest.mark.parametrize("change", [{"marker": 99}, {"catalog_visible": True}])
async def test_the_same_revision_with_other_content_or_visibility_conflicts(
    mcp: McpTestClient, change: dict[str, Any]
) -> None:
    wf_def_id = new_id()
    ok(await save(mcp, wf_def_id, 4))
    error = refused(await save(mcp, wf_def_id, 4, **change), "WORKFLOW_IDEMPOTENCY_CONFLICT")
    assert error["details"] == {
        "appliedRevision": 4,
        "definitionDigest": definition_digest(definition_text(4)),
    }


@pytest.mark.requirement("000:Saved definitions")
async def test_active_false_records_a_delete(mcp: McpTestClient, db: Database) -> None:
    wf_def_id = new_id()
    ok(await save(mcp, wf_def_id, 1))
    deleted = ok(await save(mcp, wf_def_id, 2, active=False))
    assert deleted["result"] == "saved"
    assert deleted["active"] is False
    active = await scalar(db, "SELECT active FROM wf_definition_t WHERE wf_def_id = %s", wf_def_id)
    assert active is False


@pytest.mark.requirement("000:Saved definitions")
async def test_a_save_outside_the_length_limits_is_input_invalid(
    mcp: McpTestClient, db: Database
) -> None:
    args = save_args(new_id(), 1)
    args["version"] = "1" * 21
    refused(await mcp.call_tool("workflow_definition_save", args), "WORKFLOW_INPUT_INVALID")
    assert await scalar(db, "SELECT count(*) FROM wf_definition_t") == 0


@pytest.mark.requirement("000:Concurrency")
async def test_twenty_racing_saves_end_at_the_highest_revision(
    mcp: McpTestClient, db: Database
) -> None:
    wf_def_id = new_id()
    revisions = list(range(1, 21))
    results = await asyncio.gather(*(save(mcp, wf_def_id, rev) for rev in revisions))
    receipts = [ok(result) for result in results]
    for revision, receipt in zip(revisions, receipts, strict=True):
        # Each receipt describes Workflow's state at that moment: its own revision when it
        # was applied, or a higher one that had already been applied.
        if receipt["result"] == "saved":
            assert receipt["appliedRevision"] == revision
        else:
            assert receipt["result"] == "stale"
            assert receipt["appliedRevision"] > revision
        applied = receipt["appliedRevision"]
        assert receipt["definitionDigest"] == definition_digest(definition_text(applied))
    head = await scalar(
        db, "SELECT source_revision FROM wf_definition_t WHERE wf_def_id = %s", wf_def_id
    )
    digest = await scalar(
        db, "SELECT definition_digest FROM wf_definition_t WHERE wf_def_id = %s", wf_def_id
    )
    assert head == 20
    assert digest == definition_digest(definition_text(20))


@pytest.mark.requirement("000:Definition publish")
async def test_publish_stores_an_immutable_version(mcp: McpTestClient) -> None:
    wf_def_id = new_id()
    text = versioned(definition_text(1), "1.2.0")
    receipt = ok(
        await mcp.call_tool(
            "workflow_definition_publish", publish_args(wf_def_id, "1.2.0", definition=text)
        )
    )
    assert receipt["result"] == "published"
    assert receipt["status"] == "active"
    assert receipt["definitionDigest"] == definition_digest(text)
    assert receipt["bindingApproval"] == "carryOver"
    assert receipt["schemaDigest"].startswith("sha256:")


@pytest.mark.requirement("000:Definition publish")
async def test_publishing_the_same_payload_twice_returns_unchanged(mcp: McpTestClient) -> None:
    wf_def_id = new_id()
    first = ok(await mcp.call_tool("workflow_definition_publish", publish_args(wf_def_id)))
    second = ok(await mcp.call_tool("workflow_definition_publish", publish_args(wf_def_id)))
    assert first["result"] == "published"
    assert second == {**first, "result": "unchanged"}


@pytest.mark.requirement("000:Definition publish")
async def test_publish_never_changes_the_saved_head(mcp: McpTestClient, db: Database) -> None:
    wf_def_id = new_id()
    ok(await save(mcp, wf_def_id, 3))
    ok(
        await mcp.call_tool(
            "workflow_definition_publish",
            publish_args(wf_def_id, definition=definition_text(42)),
        )
    )
    digest = await scalar(
        db, "SELECT definition_digest FROM wf_definition_t WHERE wf_def_id = %s", wf_def_id
    )
    assert digest == definition_digest(definition_text(3))


@pytest.mark.requirement("000:Lost receipts")
async def test_replaying_an_operation_returns_the_stored_receipt(mcp: McpTestClient) -> None:
    args = publish_args(new_id())
    first = await mcp.call_tool("workflow_definition_publish", args)
    replay = await mcp.call_tool("workflow_definition_publish", args)
    assert replay == first
    assert ok(replay)["result"] == "published"


@pytest.mark.requirement("000:Concurrency")
async def test_reusing_an_operation_id_with_a_different_payload_conflicts(
    mcp: McpTestClient,
) -> None:
    operation_id = new_id()
    ok(
        await mcp.call_tool(
            "workflow_definition_publish", publish_args(new_id(), operation_id=operation_id)
        )
    )
    other = publish_args(new_id(), operation_id=operation_id)
    refused(
        await mcp.call_tool("workflow_definition_publish", other), "WORKFLOW_IDEMPOTENCY_CONFLICT"
    )


@pytest.mark.requirement("000:Definition publish")
async def test_a_new_digest_for_a_published_version_is_rejected(mcp: McpTestClient) -> None:
    wf_def_id = new_id()
    ok(await mcp.call_tool("workflow_definition_publish", publish_args(wf_def_id, "2.0.0")))
    changed = publish_args(wf_def_id, "2.0.0", definition=definition_text(2))
    refused(
        await mcp.call_tool("workflow_definition_publish", changed),
        "WORKFLOW_DEFINITION_MISMATCH",
    )


@pytest.mark.requirement("000:Definition publish")
async def test_an_expected_digest_that_differs_is_a_definition_mismatch(
    mcp: McpTestClient, db: Database
) -> None:
    args = publish_args(new_id())
    args["expectedDefinitionDigest"] = "sha256:" + "0" * 64
    refused(
        await mcp.call_tool("workflow_definition_publish", args), "WORKFLOW_DEFINITION_MISMATCH"
    )
    assert await scalar(db, "SELECT count(*) FROM wf_definition_version_t") == 0


@pytest.mark.requirement("000:Definition publish")
async def test_a_definition_in_another_expression_language_is_rejected(
    mcp: McpTestClient, db: Database
) -> None:
    text = definition_text(1) + "evaluate:\n  language: jq\n"
    args = publish_args(new_id(), definition=text)
    error = refused(
        await mcp.call_tool("workflow_definition_publish", args), "WORKFLOW_INPUT_INVALID"
    )
    assert "jq" in error["message"] or "language" in error["message"]
    assert await scalar(db, "SELECT count(*) FROM wf_definition_version_t") == 0


@pytest.mark.requirement("000:Definition publish")
async def test_retire_is_terminal_and_republish_reports_the_retired_status(
    mcp: McpTestClient,
) -> None:
    wf_def_id = new_id()
    ok(await mcp.call_tool("workflow_definition_publish", publish_args(wf_def_id, "3.0.0")))
    retire = {
        "hostId": publish_args(wf_def_id)["hostId"],
        "wfDefId": wf_def_id,
        "version": "3.0.0",
        "operationId": new_id(),
    }
    retired = ok(await mcp.call_tool("workflow_definition_retire", retire))
    assert retired["result"] == "retired"
    assert retired["status"] == "retired"
    again = ok(
        await mcp.call_tool("workflow_definition_retire", {**retire, "operationId": new_id()})
    )
    assert again["result"] == "unchanged"
    republished = ok(
        await mcp.call_tool("workflow_definition_publish", publish_args(wf_def_id, "3.0.0"))
    )
    assert republished["result"] == "unchanged"
    assert republished["status"] == "retired"


@pytest.mark.requirement("000:Request host and identity")
async def test_a_mismatched_host_leaves_no_ledger_row_and_cannot_replay_a_receipt(
    mcp: McpTestClient, db: Database, dev_identity: DevIdentity
) -> None:
    args = publish_args(new_id())
    original = await mcp.call_tool("workflow_definition_publish", args)
    ok(original)
    # A caller of another host names this host and replays the same operation: refused
    # before any read, and it learns nothing about the stored receipt.
    other = auth_headers(
        dev_identity,
        dev_identity.user_token(host_id=OTHER_HOST, roles=("workflow-admin",)),
        dev_identity.app_token(host_id=OTHER_HOST),
    )
    replay = await mcp.call_tool("workflow_definition_publish", args, headers=other)
    error = refused(replay, "WORKFLOW_POLICY_DENIED")
    assert "sha256" not in str(error)
    assert (
        await scalar(
            db,
            "SELECT count(*) FROM workflow_publication_operation_t WHERE host_id = %s",
            OTHER_HOST,
        )
        == 0
    )
    # With its own host the same operation id is a separate operation of that host.
    own = {**args, "hostId": OTHER_HOST}
    mine = ok(await mcp.call_tool("workflow_definition_publish", own, headers=other))
    assert mine["result"] == "published"
    assert await scalar(db, "SELECT count(*) FROM workflow_publication_operation_t") == 2


@pytest.mark.requirement("000:Grants")
async def test_grant_sets_follow_the_source_revision_rules(
    mcp: McpTestClient, db: Database
) -> None:
    wf_def_id = new_id()
    first = ok(
        await mcp.call_tool(
            "workflow_definition_grants_sync", grants_args(wf_def_id, 5, [new_id(), new_id()])
        )
    )
    assert first["result"] == "saved"
    assert first["appliedRevision"] == 5
    # A delayed older set that still had a removed grant changes nothing.
    stale = ok(
        await mcp.call_tool(
            "workflow_definition_grants_sync", grants_args(wf_def_id, 4, [new_id()])
        )
    )
    assert stale == {**first, "result": "stale"}
    assert await scalar(db, "SELECT count(*) FROM workflow_tool_grant_t") == 2
    emptied = ok(
        await mcp.call_tool("workflow_definition_grants_sync", grants_args(wf_def_id, 6, []))
    )
    assert emptied["result"] == "saved"
    assert emptied["appliedRevision"] == 6
    assert await scalar(db, "SELECT count(*) FROM workflow_tool_grant_t") == 0


@pytest.mark.requirement("000:Grants")
async def test_an_equal_grant_revision_with_another_set_conflicts(mcp: McpTestClient) -> None:
    wf_def_id = new_id()
    ok(
        await mcp.call_tool(
            "workflow_definition_grants_sync", grants_args(wf_def_id, 2, [new_id()])
        )
    )
    error = refused(
        await mcp.call_tool(
            "workflow_definition_grants_sync", grants_args(wf_def_id, 2, [new_id()])
        ),
        "WORKFLOW_IDEMPOTENCY_CONFLICT",
    )
    assert error["details"]["appliedRevision"] == 2


async def test_an_unknown_argument_is_input_invalid_before_storage(
    mcp: McpTestClient, db: Database
) -> None:
    args = {**publish_args(new_id()), "stableToolRef": new_id()}
    error = refused(
        await mcp.call_tool("workflow_definition_publish", args), "WORKFLOW_INPUT_INVALID"
    )
    assert error["retryable"] is False
    assert await scalar(db, "SELECT count(*) FROM workflow_publication_operation_t") == 0


@pytest.mark.requirement("000:Definition publish")
@pytest.mark.parametrize("call", ["[http]", "{}", "{http: 1}"])
async def test_a_call_that_is_not_a_function_name_is_input_invalid_not_a_server_fault(
    mcp: McpTestClient, db: Database, call: str
) -> None:
    text = definition_text(1) + f"  - fetch:\n      call: {call}\n"
    args = publish_args(new_id(), definition=text)
    result = await mcp.call_tool("workflow_definition_publish", args)
    error = refused(result, "WORKFLOW_INPUT_INVALID")
    assert "call" in error["message"]
    assert await scalar(db, "SELECT count(*) FROM wf_definition_version_t") == 0


@pytest.mark.requirement("000:Definition publish")
@pytest.mark.parametrize(
    ("escaped", "discriminator"), [("a\\0b", "nul-character"), ("\\ud800", "lone-surrogate")]
)
async def test_a_nul_or_lone_surrogate_in_a_definition_is_input_invalid(
    mcp: McpTestClient, db: Database, escaped: str, discriminator: str
) -> None:
    text = definition_text(1) + f'  - note:\n      set:\n        text: "{escaped}"\n'
    args = {**publish_args(new_id()), "definition": text}
    args["expectedDefinitionDigest"] = "sha256:" + "0" * 64
    result = await mcp.call_tool("workflow_definition_publish", args)
    error = refused(result, "WORKFLOW_INPUT_INVALID")
    assert error["details"]["discriminator"] == discriminator
    assert await scalar(db, "SELECT count(*) FROM wf_definition_version_t") == 0
    saved = await mcp.call_tool("workflow_definition_save", save_args(new_id(), 1, definition=text))
    assert refused(saved, "WORKFLOW_INPUT_INVALID")["details"]["discriminator"] == discriminator
