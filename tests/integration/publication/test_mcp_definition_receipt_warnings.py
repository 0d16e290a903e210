"""An unchanged definition receipt repeats the warnings stored with its version (POST /mcp)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime.errors import WorkflowError
from runtime.store import Database
from tests.support.binding_builders import definition_yaml, insert_version_row, new_id
from tests.support.checker import decision_yaml, optional_read_yaml, publish_arguments
from tests.support.invocation import ok, save_head
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("001:CEL Runtime Contract")

SENTINEL = [{"code": "stored.warning", "pointer": "/do/0/finish", "message": "kept at publish"}]


async def _stored_warnings(db: Database, wf_def_id: str) -> Any:
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT publication_warnings FROM wf_definition_version_t WHERE wf_def_id = %(id)s",
            {"id": wf_def_id},
        )
        row = await cursor.fetchone()
    assert row is not None
    return row["publication_warnings"]


async def _set_stored_warnings(db: Database, wf_def_id: str, warnings: Any) -> None:
    async with db.transaction() as conn:
        await conn.execute(
            "UPDATE wf_definition_version_t SET publication_warnings = %(w)s::jsonb"
            " WHERE wf_def_id = %(id)s",
            {"w": json.dumps(warnings), "id": wf_def_id},
        )


async def _publish(owner: McpTestClient, wf_def_id: str, text: str) -> dict[str, Any]:
    return ok(
        await owner.call_tool("workflow_definition_publish", publish_arguments(wf_def_id, text))
    )


async def test_a_republished_version_is_unchanged_with_the_warnings_stored_at_publish(
    owner: McpTestClient, db: Database
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    first = await _publish(owner, wf_def_id, optional_read_yaml())
    assert first["result"] == "published"
    assert [w["code"] for w in first["warnings"]] == ["data.field-maybe-absent"]
    assert await _stored_warnings(db, wf_def_id) == first["warnings"]
    again = await _publish(owner, wf_def_id, optional_read_yaml())
    assert again == {**first, "result": "unchanged"}


async def test_the_unchanged_receipt_reads_the_stored_warnings_instead_of_checking_again(
    owner: McpTestClient, db: Database
) -> None:
    wf_def_id = new_id()
    text = decision_yaml("workflow.input.applicantId")  # the checker finds nothing here
    await save_head(owner, wf_def_id, definition_yaml())
    await insert_version_row(db, wf_def_id, text)
    await _set_stored_warnings(db, wf_def_id, SENTINEL)
    receipt = await _publish(owner, wf_def_id, text)
    assert receipt["result"] == "unchanged"
    assert receipt["warnings"] == SENTINEL  # what was stored, not a new check (which has none)


async def test_a_version_from_before_warnings_were_kept_gets_them_computed_once_and_stored(
    owner: McpTestClient, db: Database
) -> None:
    wf_def_id = new_id()
    text = optional_read_yaml()
    await save_head(owner, wf_def_id, definition_yaml())
    await insert_version_row(db, wf_def_id, text)  # as an older service stored it: NULL
    assert await _stored_warnings(db, wf_def_id) is None
    receipt = await _publish(owner, wf_def_id, text)
    assert receipt["result"] == "unchanged"
    assert [w["pointer"] for w in receipt["warnings"]] == ["/do/0/greet"]
    assert await _stored_warnings(db, wf_def_id) == receipt["warnings"]
    # Stored once, then as immutable as the rest of the version.
    with pytest.raises(WorkflowError):
        await _set_stored_warnings(db, wf_def_id, SENTINEL)
    assert await _publish(owner, wf_def_id, text) == receipt
