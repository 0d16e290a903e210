"""The operation receipt ledger: replay, conflict, host and user scope, stored rejections, sweep."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from runtime.canonical import canonical_bytes, canonical_digest, definition_digest
from runtime.errors import WorkflowError
from runtime.publication import sweep_operation_receipts
from runtime.store import Database
from tests.support.publication_builders import (
    OTHER_HOST,
    context,
    definition_text,
    new_id,
    publish_args,
    retire_args,
)
from tests.support.publication_reads import read_definition_version
from tests.support.service_calls import publish_definition, retire_definition

pytestmark = pytest.mark.requirement("000:Lost receipts")


async def _stored_operation(db: Database, operation_id: str) -> dict[str, object] | None:
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT tool_name, request_digest, response, is_error, requested_by"
            " FROM workflow_publication_operation_t WHERE operation_id = %(id)s",
            {"id": operation_id},
        )
        return await cursor.fetchone()


async def test_the_same_request_replays_the_stored_receipt_byte_for_byte(db: Database) -> None:
    wf_def_id = new_id()
    args = publish_args(wf_def_id)
    first = await publish_definition(db, context(), args)
    # A retire in between must not leak into the replayed receipt.
    await retire_definition(db, context(), retire_args(wf_def_id))
    replay = await publish_definition(db, context(), dict(args))
    assert json.dumps(replay) == json.dumps(first)
    stored = await _stored_operation(db, args["operationId"])
    assert stored is not None
    assert canonical_bytes(stored["response"]) == canonical_bytes(first)  # type: ignore[arg-type]
    assert stored["request_digest"] == canonical_digest(args)
    assert (stored["tool_name"], stored["is_error"]) == ("workflow_definition_publish", False)


async def test_reusing_an_operation_id_with_another_payload_conflicts(db: Database) -> None:
    wf_def_id = new_id()
    args = publish_args(wf_def_id)
    await publish_definition(db, context(), args)
    changed = publish_args(wf_def_id, version="2.0.0", operationId=args["operationId"])
    with pytest.raises(WorkflowError) as caught:
        await publish_definition(db, context(), changed)
    assert caught.value.code == "WORKFLOW_IDEMPOTENCY_CONFLICT"
    assert await read_definition_version(db, context(), wf_def_id, "2.0.0") is None


async def test_reusing_an_operation_id_for_another_tool_conflicts(db: Database) -> None:
    wf_def_id = new_id()
    args = publish_args(wf_def_id)
    await publish_definition(db, context(), args)
    with pytest.raises(WorkflowError) as caught:
        await retire_definition(
            db, context(), retire_args(wf_def_id, operationId=args["operationId"])
        )
    assert caught.value.code == "WORKFLOW_IDEMPOTENCY_CONFLICT"
    stored = await read_definition_version(db, context(), wf_def_id, "1.2.0")
    assert stored is not None
    assert stored.status == "active"


async def test_another_host_never_sees_or_replays_the_operation(db: Database) -> None:
    wf_def_id = new_id()
    args = publish_args(wf_def_id)
    await publish_definition(db, context(), args)
    with pytest.raises(WorkflowError) as caught:
        await publish_definition(db, context(OTHER_HOST), args)
    assert caught.value.code == "WORKFLOW_POLICY_DENIED"
    # Under its own host the same operationId is simply new work in that host's scope.
    own = await publish_definition(db, context(OTHER_HOST), {**args, "hostId": OTHER_HOST})
    assert own["result"] == "published"
    assert await read_definition_version(db, context(OTHER_HOST), wf_def_id, "1.2.0") is not None


async def test_another_user_cannot_replay_the_operation(db: Database) -> None:
    args = publish_args(new_id())
    await publish_definition(db, context(), args)
    with pytest.raises(WorkflowError) as caught:
        await publish_definition(db, context(user_id="mallory"), args)
    assert caught.value.code == "WORKFLOW_POLICY_DENIED"


async def test_a_final_rejection_is_stored_and_replayed_unchanged(db: Database) -> None:
    wf_def_id = new_id()
    wrong = definition_digest(definition_text(2))
    args = publish_args(wf_def_id, expectedDefinitionDigest=wrong)
    with pytest.raises(WorkflowError) as first:
        await publish_definition(db, context(), args)
    with pytest.raises(WorkflowError) as again:
        await publish_definition(db, context(), args)
    assert json.dumps(again.value.to_structured()) == json.dumps(first.value.to_structured())
    assert again.value.text() == first.value.text()
    stored = await _stored_operation(db, args["operationId"])
    assert stored is not None
    assert stored["is_error"] is True


async def test_a_transient_rejection_is_not_stored(db: Database) -> None:
    args = retire_args(new_id())
    with pytest.raises(WorkflowError):
        await retire_definition(db, context(), args)
    assert await _stored_operation(db, args["operationId"]) is None


async def test_overlapping_attempts_of_one_operation_serialize_to_one_receipt(
    database_url: str,
) -> None:
    args = publish_args(new_id())
    async with Database(database_url, min_size=1, max_size=8) as racing_db:
        receipts = await asyncio.gather(
            *(publish_definition(racing_db, context(), dict(args)) for _ in range(8))
        )
    assert all(json.dumps(receipt) == json.dumps(receipts[0]) for receipt in receipts)
    assert receipts[0]["result"] == "published"


async def test_sweeper_removes_only_records_older_than_thirty_days(db: Database) -> None:
    old_args, fresh_args = publish_args(new_id()), publish_args(new_id())
    await publish_definition(db, context(), old_args)
    await publish_definition(db, context(), fresh_args)
    async with db.transaction() as conn:
        await conn.execute(
            "UPDATE workflow_publication_operation_t"
            " SET created_at = now() - interval '30 days 1 minute'"
            " WHERE operation_id = %(id)s",
            {"id": old_args["operationId"]},
        )
    deleted = await sweep_operation_receipts(db, batch_size=1)
    assert deleted == 1
    assert await _stored_operation(db, old_args["operationId"]) is None
    assert await _stored_operation(db, fresh_args["operationId"]) is not None


async def test_sweeper_keeps_records_younger_than_the_retention(db: Database) -> None:
    args = publish_args(new_id())
    await publish_definition(db, context(), args)
    almost = datetime.now(UTC) + timedelta(days=29, hours=23)
    assert await sweep_operation_receipts(db, now=almost) == 0
    assert await sweep_operation_receipts(db, now=almost + timedelta(hours=2)) == 1
