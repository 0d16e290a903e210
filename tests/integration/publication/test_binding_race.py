"""30 concurrent publishes of different bindings for one Tool, on separate connections."""

from __future__ import annotations

import asyncio
from typing import Any

from runtime.errors import WorkflowError
from runtime.store import Database
from tests.support.binding_builders import (
    HOST,
    author_ctx,
    binding,
    definition_yaml,
    new_id,
    owner_ctx,
    publish_args,
    publish_version,
    save_owner,
)
from tests.support.service_calls import get_binding, publish_binding

PUBLISHERS = 30


async def _publish_until_accepted(
    db: Database, index: int, wf_def_id: str, tool_id: str, text: str
) -> dict[str, Any]:
    # Every third publisher is the owner (self-approval); the others need approval.
    ctx = owner_ctx() if index % 3 == 0 else author_ctx()
    value = binding(wf_def_id, tool_id, text, syncWaitMs=1000 + index)
    while True:
        try:
            # The owner reads the head: an author unrelated to the Tool yet may not see it.
            head = await get_binding(db, owner_ctx(), {"hostId": HOST, "toolId": tool_id})
        except WorkflowError as error:
            assert error.code == "WORKFLOW_NOT_FOUND"  # nothing published yet
            head = {"aggregateVersion": 0}
        try:
            return await publish_binding(db, ctx, publish_args(value, head["aggregateVersion"]))
        except WorkflowError as error:
            if error.code != "VERSION_CONFLICT":
                raise
            await asyncio.sleep(0)


async def test_concurrent_publishes_keep_one_active_one_pending_and_a_gap_free_version(
    database_url: str, db: Database
) -> None:
    wf_def_id = new_id()
    await save_owner(db, wf_def_id)
    text = definition_yaml()
    await publish_version(db, wf_def_id, text=text)
    tool_id = new_id()
    wide = Database(database_url, min_size=PUBLISHERS, max_size=PUBLISHERS)
    await wide.open()
    try:
        async with asyncio.timeout(120):
            receipts = await asyncio.gather(
                *(
                    _publish_until_accepted(wide, index, wf_def_id, tool_id, text)
                    for index in range(PUBLISHERS)
                )
            )
    finally:
        await wide.close()

    versions = sorted(receipt["aggregateVersion"] for receipt in receipts)
    assert versions == list(range(1, PUBLISHERS + 1))
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "SELECT binding_id::text AS id, revision_status, active FROM workflow_tool_binding_t"
            " WHERE tool_id = %(tool)s",
            {"tool": tool_id},
        )
        rows = {row["id"]: row for row in await cursor.fetchall()}
    assert len(rows) == PUBLISHERS
    assert sum(row["active"] for row in rows.values()) == 1
    assert sum(row["revision_status"] == "pendingApproval" for row in rows.values()) <= 1

    # Replaying the receipts in aggregate order under the status rules gives the final state.
    active: str | None = None
    pending: str | None = None
    for receipt in sorted(receipts, key=lambda r: r["aggregateVersion"]):
        if receipt["status"] == "active":
            active, pending = receipt["bindingId"], None
        else:
            pending = receipt["bindingId"]
    head = await get_binding(db, owner_ctx(), {"hostId": HOST, "toolId": tool_id})
    assert head["aggregateVersion"] == PUBLISHERS
    assert head.get("activeBindingId") == active
    assert head.get("pendingBindingId") == pending
    for receipt in receipts:
        final = rows[receipt["bindingId"]]["revision_status"]
        if receipt["bindingId"] == active:
            assert final == "approved"
        elif receipt["bindingId"] == pending:
            assert final == "pendingApproval"
        else:
            assert final == "superseded"
