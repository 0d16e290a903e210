"""workflow_definition_publish and _retire: immutable versions and their status."""

from __future__ import annotations

import pytest

from runtime.canonical import definition_digest, load_definition_yaml, schema_digest
from runtime.errors import WorkflowError
from runtime.store import Database
from tests.support.publication_builders import (
    context,
    definition_text,
    new_id,
    publish_args,
    retire_args,
)
from tests.support.publication_reads import read_definition_version
from tests.support.service_calls import publish_definition, retire_definition


async def test_publish_stores_an_active_version_with_both_digests(db: Database) -> None:
    wf_def_id = new_id()
    receipt = await publish_definition(db, context(), publish_args(wf_def_id))
    document = load_definition_yaml(definition_text(1))
    assert receipt == {
        "bindingApproval": "carryOver",
        "definitionDigest": definition_digest(document),
        "result": "published",
        "schemaDigest": schema_digest(document),
        "status": "active",
        "version": "1.2.0",
        "wfDefId": wf_def_id,
    }
    stored = await read_definition_version(db, context(), wf_def_id, "1.2.0")
    assert stored is not None
    assert stored.document == document
    assert stored.published_by == "steve"


async def test_republishing_the_same_digest_is_unchanged(db: Database) -> None:
    wf_def_id = new_id()
    await publish_definition(db, context(), publish_args(wf_def_id))
    receipt = await publish_definition(
        db, context(), publish_args(wf_def_id, bindingApproval="reapprove")
    )
    assert (receipt["result"], receipt["status"]) == ("unchanged", "active")
    assert receipt["bindingApproval"] == "carryOver"


async def test_republishing_a_retired_version_is_unchanged_with_retired_status(
    db: Database,
) -> None:
    wf_def_id = new_id()
    await publish_definition(db, context(), publish_args(wf_def_id))
    await retire_definition(db, context(), retire_args(wf_def_id))
    receipt = await publish_definition(db, context(), publish_args(wf_def_id))
    assert (receipt["result"], receipt["status"]) == ("unchanged", "retired")


async def test_a_new_digest_for_a_published_version_is_rejected(db: Database) -> None:
    wf_def_id = new_id()
    await publish_definition(db, context(), publish_args(wf_def_id, marker=1))
    with pytest.raises(WorkflowError) as caught:
        await publish_definition(db, context(), publish_args(wf_def_id, marker=2))
    assert caught.value.code == "WORKFLOW_DEFINITION_MISMATCH"
    stored = await read_definition_version(db, context(), wf_def_id, "1.2.0")
    assert stored is not None
    assert stored.definition == definition_text(1)


async def test_expected_digest_that_differs_from_the_text_is_a_mismatch(db: Database) -> None:
    wf_def_id = new_id()
    args = publish_args(wf_def_id, expectedDefinitionDigest=definition_digest(definition_text(2)))
    with pytest.raises(WorkflowError) as caught:
        await publish_definition(db, context(), args)
    assert caught.value.code == "WORKFLOW_DEFINITION_MISMATCH"
    assert caught.value.details == {"definitionDigest": definition_digest(definition_text(1))}
    assert await read_definition_version(db, context(), wf_def_id, "1.2.0") is None


async def test_definition_text_outside_yaml_1_2_rules_is_input_invalid(db: Database) -> None:
    text = "document: &d {name: x}\ncopy: *d\n"
    args = publish_args(new_id(), definition=text, expectedDefinitionDigest="sha256:" + "0" * 64)
    with pytest.raises(WorkflowError) as caught:
        await publish_definition(db, context(), args)
    assert caught.value.code == "WORKFLOW_INPUT_INVALID"
    assert caught.value.details == {"discriminator": "alias-refused"}


async def test_invalid_definition_model_is_rejected(db: Database) -> None:
    text = "document:\n  dsl: '1.0.3'\n  namespace: claims\n  name: broken\n  version: '1.0.0'\n"
    args = publish_args(new_id(), definition=text, expectedDefinitionDigest=definition_digest(text))
    with pytest.raises(WorkflowError) as caught:
        await publish_definition(db, context(), args)
    assert caught.value.code == "WORKFLOW_INPUT_INVALID"


async def test_versions_longer_than_64_characters_are_input_invalid(db: Database) -> None:
    with pytest.raises(WorkflowError) as caught:
        await publish_definition(db, context(), publish_args(new_id(), version="1" * 65))
    assert caught.value.code == "WORKFLOW_INPUT_INVALID"


async def test_retire_moves_an_active_version_to_retired(db: Database) -> None:
    wf_def_id = new_id()
    await publish_definition(db, context(), publish_args(wf_def_id))
    receipt = await retire_definition(db, context(), retire_args(wf_def_id))
    assert (receipt["result"], receipt["status"]) == ("retired", "retired")
    stored = await read_definition_version(db, context(), wf_def_id, "1.2.0")
    assert stored is not None
    assert stored.status == "retired"
    assert stored.retired_by == "steve"


async def test_retiring_a_retired_version_returns_the_retired_receipt(db: Database) -> None:
    wf_def_id = new_id()
    await publish_definition(db, context(), publish_args(wf_def_id))
    first = await retire_definition(db, context(), retire_args(wf_def_id))
    again = await retire_definition(db, context(), retire_args(wf_def_id))
    assert again == {**first, "result": "unchanged"}


async def test_retiring_an_unknown_version_is_not_found_and_not_stored(db: Database) -> None:
    wf_def_id = new_id()
    args = retire_args(wf_def_id)
    with pytest.raises(WorkflowError) as caught:
        await retire_definition(db, context(), args)
    assert caught.value.code == "WORKFLOW_NOT_FOUND"
    await publish_definition(db, context(), publish_args(wf_def_id))
    receipt = await retire_definition(db, context(), args)
    assert receipt["result"] == "retired"


async def test_retire_takes_no_expected_digest_and_changes_nothing(db: Database) -> None:
    # The retire contract has no expectedDefinitionDigest: the member is refused, not judged.
    wf_def_id = new_id()
    await publish_definition(db, context(), publish_args(wf_def_id))
    args = retire_args(wf_def_id, expectedDefinitionDigest="sha256:" + "1" * 64)
    with pytest.raises(WorkflowError) as caught:
        await retire_definition(db, context(), args)
    assert caught.value.code == "WORKFLOW_INPUT_INVALID"
    stored = await read_definition_version(db, context(), wf_def_id, "1.2.0")
    assert stored is not None and stored.status == "active"


async def test_the_database_refuses_to_edit_or_revive_a_version(database_url: str) -> None:
    import psycopg

    wf_def_id = new_id()
    async with Database(database_url, min_size=1, max_size=2) as db:
        await publish_definition(db, context(), publish_args(wf_def_id))
        await retire_definition(db, context(), retire_args(wf_def_id))
        for statement in (
            "UPDATE wf_definition_version_t SET status = 'active', retired_ts = NULL",
            "UPDATE wf_definition_version_t SET definition = 'x'",
        ):
            with pytest.raises(WorkflowError):
                async with db.transaction() as conn:
                    await conn.execute(statement)  # type: ignore[arg-type]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with db.transaction() as conn:
                await conn.execute("DELETE FROM wf_definition_version_t")


async def test_an_active_version_cannot_be_rewritten_in_place(db: Database) -> None:
    wf_def_id = new_id()
    await publish_definition(db, context(), publish_args(wf_def_id))
    with pytest.raises(WorkflowError) as caught:
        async with db.transaction() as conn:
            await conn.execute(
                "UPDATE wf_definition_version_t SET schema_digest = definition_digest"
            )
    assert caught.value.code == "WORKFLOW_DEFINITION_MISMATCH"
