"""workflow_definition_save: the sourceRevision rules, delete, ownership and the save race."""

from __future__ import annotations

import pytest

from runtime.canonical import definition_digest
from runtime.errors import WorkflowError
from runtime.store import Database
from tests.support.publication_builders import (
    HOST,
    OTHER_HOST,
    context,
    definition_text,
    new_id,
    save_args,
)
from tests.support.publication_reads import read_definition_head
from tests.support.service_calls import save_definition


async def test_first_save_creates_the_head_and_reports_saved(db: Database) -> None:
    wf_def_id = new_id()
    receipt = await save_definition(db, context(), save_args(wf_def_id, 7))
    assert receipt == {
        "result": "saved",
        "wfDefId": wf_def_id,
        "appliedRevision": 7,
        "definitionDigest": definition_digest(definition_text(1)),
        "active": True,
    }
    head = await read_definition_head(db, context(), wf_def_id)
    assert head is not None
    assert head.source_revision == 7
    assert head.definition == definition_text(1)
    assert head.saved_by == "steve"


async def test_equal_revision_with_same_content_is_unchanged(db: Database) -> None:
    wf_def_id = new_id()
    await save_definition(db, context(), save_args(wf_def_id, 7))
    receipt = await save_definition(db, context(), save_args(wf_def_id, 7, actor="someone-else"))
    assert receipt["result"] == "unchanged"
    assert receipt["appliedRevision"] == 7


@pytest.mark.parametrize(
    "change",
    [{"marker": 2}, {"catalogVisible": True}, {"active": False}, {"owner": {"userId": "other"}}],
    ids=["text", "visibility", "active", "owner"],
)
async def test_equal_revision_with_different_content_conflicts_with_details(
    db: Database, change: dict[str, object]
) -> None:
    wf_def_id = new_id()
    await save_definition(db, context(), save_args(wf_def_id, 7))
    with pytest.raises(WorkflowError) as caught:
        await save_definition(db, context(), save_args(wf_def_id, 7, **change))  # type: ignore[arg-type]
    assert caught.value.code == "WORKFLOW_IDEMPOTENCY_CONFLICT"
    assert caught.value.details == {
        "appliedRevision": 7,
        "definitionDigest": definition_digest(definition_text(1)),
    }


async def test_higher_revision_replaces_text_visibility_and_owner(db: Database) -> None:
    wf_def_id = new_id()
    await save_definition(db, context(), save_args(wf_def_id, 7))
    receipt = await save_definition(
        db,
        context(),
        save_args(wf_def_id, 8, marker=8, catalogVisible=True, owner={"userId": "new-owner"}),
    )
    assert receipt["result"] == "saved"
    assert receipt["appliedRevision"] == 8
    assert receipt["definitionDigest"] == definition_digest(definition_text(8))
    head = await read_definition_head(db, context(), wf_def_id)
    assert head is not None
    assert head.catalog_visible is True
    assert (head.owner_user_id, head.owner_position_id) == ("new-owner", None)


async def test_host_mismatch_is_refused_before_storage(db: Database) -> None:
    wf_def_id = new_id()
    with pytest.raises(WorkflowError) as caught:
        await save_definition(db, context(OTHER_HOST), save_args(wf_def_id, 7))
    assert caught.value.code == "WORKFLOW_POLICY_DENIED"
    assert await read_definition_head(db, context(OTHER_HOST), wf_def_id) is None
    assert await read_definition_head(db, context(HOST), wf_def_id) is None


async def test_heads_of_one_definition_id_are_separate_per_host(db: Database) -> None:
    wf_def_id = new_id()
    await save_definition(db, context(), save_args(wf_def_id, 7))
    other = save_args(wf_def_id, 3, marker=3, hostId=OTHER_HOST)
    receipt = await save_definition(db, context(OTHER_HOST), other)
    assert (receipt["result"], receipt["appliedRevision"]) == ("saved", 3)


async def test_unparseable_definition_text_is_input_invalid(db: Database) -> None:
    with pytest.raises(WorkflowError) as caught:
        await save_definition(db, context(), save_args(new_id(), 1, definition="a: 1\na: 2\n"))
    assert caught.value.code == "WORKFLOW_INPUT_INVALID"
    assert caught.value.details == {"discriminator": "duplicate-key"}


async def test_over_long_head_version_is_input_invalid(db: Database) -> None:
    with pytest.raises(WorkflowError) as caught:
        await save_definition(db, context(), save_args(new_id(), 1, version="1" * 21))
    assert caught.value.code == "WORKFLOW_INPUT_INVALID"
