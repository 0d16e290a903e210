"""workflow_definition_grants_sync: whole-set replacement under the sourceRevision rules."""

from __future__ import annotations

import msgspec
import pytest

from generated.models import WorkflowDefinitionGrantsSyncInput
from runtime.errors import WorkflowError
from runtime.publication import grants_digest
from runtime.store import Database
from tests.support.publication_builders import (
    OTHER_HOST,
    context,
    grant,
    grants_args,
    named_uuid,
    new_id,
)
from tests.support.publication_reads import read_definition_grants
from tests.support.service_calls import sync_definition_grants as sync


def _digest_of(grants: list[dict[str, object]]) -> str:
    args = grants_args(new_id(), 0, grants)
    return grants_digest(msgspec.convert(args, WorkflowDefinitionGrantsSyncInput).grants)


def _ids(*names: str) -> list[str]:
    return sorted(named_uuid(name) for name in names)


async def _grant_ids(db: Database, wf_def_id: str) -> list[str]:
    rows = await read_definition_grants(db, context(), wf_def_id)
    return sorted(row.grant_id for row in rows)


async def test_first_sync_stores_the_set_and_its_digest(db: Database) -> None:
    wf_def_id = new_id()
    grants = [grant("g2", environments=["prod", "dev"]), grant("g1")]
    receipt = await sync(db, context(), grants_args(wf_def_id, 12, grants))
    assert receipt == {
        "result": "saved",
        "wfDefId": wf_def_id,
        "appliedRevision": 12,
        "grantsDigest": _digest_of(grants),
    }
    rows = await read_definition_grants(db, context(), wf_def_id)
    assert sorted((row.grant_id, row.allowed_environments) for row in rows) == sorted(
        [(named_uuid("g1"), ["dev"]), (named_uuid("g2"), ["dev", "prod"])]
    )


async def test_grants_digest_ignores_grant_order(db: Database) -> None:
    assert _digest_of([grant("a"), grant("b")]) == _digest_of([grant("b"), grant("a")])
    assert _digest_of([grant("a")]) != _digest_of([grant("a", environments=["prod"])])


async def test_higher_revision_replaces_the_whole_set(db: Database) -> None:
    wf_def_id = new_id()
    await sync(db, context(), grants_args(wf_def_id, 12, [grant("g1"), grant("g2")]))
    receipt = await sync(db, context(), grants_args(wf_def_id, 13, [grant("g3")]))
    assert (receipt["result"], receipt["appliedRevision"]) == ("saved", 13)
    assert await _grant_ids(db, wf_def_id) == _ids("g3")


async def test_an_empty_set_revokes_every_grant(db: Database) -> None:
    wf_def_id = new_id()
    await sync(db, context(), grants_args(wf_def_id, 1, [grant("g1")]))
    await sync(db, context(), grants_args(wf_def_id, 2, []))
    assert await _grant_ids(db, wf_def_id) == []


async def test_a_delayed_lower_revision_is_stale_and_cannot_restore_a_grant(db: Database) -> None:
    wf_def_id = new_id()
    await sync(db, context(), grants_args(wf_def_id, 12, [grant("g1"), grant("g2")]))
    await sync(db, context(), grants_args(wf_def_id, 13, [grant("g1")]))
    receipt = await sync(db, context(), grants_args(wf_def_id, 12, [grant("g1"), grant("g2")]))
    assert receipt["result"] == "stale"
    assert receipt["appliedRevision"] == 13
    assert receipt["grantsDigest"] == _digest_of([grant("g1")])
    assert await _grant_ids(db, wf_def_id) == _ids("g1")


async def test_equal_revision_with_the_same_set_is_unchanged(db: Database) -> None:
    wf_def_id = new_id()
    await sync(db, context(), grants_args(wf_def_id, 5, [grant("g1"), grant("g2")]))
    receipt = await sync(db, context(), grants_args(wf_def_id, 5, [grant("g2"), grant("g1")]))
    assert receipt["result"] == "unchanged"


async def test_equal_revision_with_another_set_conflicts_with_details(db: Database) -> None:
    wf_def_id = new_id()
    await sync(db, context(), grants_args(wf_def_id, 5, [grant("g1")]))
    with pytest.raises(WorkflowError) as caught:
        await sync(db, context(), grants_args(wf_def_id, 5, [grant("g9")]))
    assert caught.value.code == "WORKFLOW_IDEMPOTENCY_CONFLICT"
    assert caught.value.details == {"appliedRevision": 5, "grantsDigest": _digest_of([grant("g1")])}
    assert await _grant_ids(db, wf_def_id) == _ids("g1")


async def test_a_repeated_grant_id_is_input_invalid(db: Database) -> None:
    with pytest.raises(WorkflowError) as caught:
        await sync(db, context(), grants_args(new_id(), 1, [grant("g1"), grant("g1")]))
    assert caught.value.code == "WORKFLOW_INPUT_INVALID"


async def test_grant_sync_for_another_host_is_refused(db: Database) -> None:
    wf_def_id = new_id()
    with pytest.raises(WorkflowError) as caught:
        await sync(db, context(OTHER_HOST), grants_args(wf_def_id, 1, [grant("g1")]))
    assert caught.value.code == "WORKFLOW_POLICY_DENIED"
    assert await _grant_ids(db, wf_def_id) == []
