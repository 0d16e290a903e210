"""Binding rules that run inside the definition services' transactions (retire, save)."""

from __future__ import annotations

from runtime.errors import WorkflowError
from runtime.publication.bindings.approval import close_with_decision
from runtime.publication.store import binding_rows
from runtime.publication.store.definition_rows import Owner
from runtime.security import InvocationContext
from runtime.store import Connection


async def on_definition_version_retire(
    conn: Connection,
    ctx: InvocationContext,
    wf_def_id: str,
    version: str,
    operation_id: str | None,
) -> list[str]:
    """Call after locking the version FOR UPDATE: refuse while an active revision pins it, then
    withdraw its pending revisions (each with a decision). Returns the withdrawn binding ids."""
    if await binding_rows.count_active_pinning(conn, ctx.host_id, wf_def_id, version) > 0:
        raise WorkflowError(
            "WORKFLOW_STATE_CONFLICT",
            "an active binding revision pins this definition version; retire or repin it first",
        )
    withdrawn: list[str] = []
    # Heads lock in Tool order, after the version row: the fixed lock order of every operation.
    for pending in await binding_rows.select_pending_pinning(conn, ctx.host_id, wf_def_id, version):
        head = await binding_rows.lock_head(conn, ctx.host_id, pending.tool_id)
        decision = await close_with_decision(
            conn,
            ctx,
            pending.binding_id,
            status="withdrawn",
            action="withdraw",
            operation_id=operation_id,
            comment="definition version retired",
        )
        if decision is None:
            continue
        await binding_rows.advance_head(
            conn,
            ctx.host_id,
            pending.tool_id,
            active_binding_id=head.active_binding_id,
            pending_binding_id=None
            if head.pending_binding_id == pending.binding_id
            else head.pending_binding_id,
        )
        withdrawn.append(pending.binding_id)
    return withdrawn


async def on_definition_owner_saved(
    conn: Connection, host_id: str, wf_def_id: str, owner: Owner
) -> int:
    """Call inside workflow_definition_save when it applies a head: pending revisions of the
    definition move to the saved owner; active approvals stay. Returns how many moved."""
    return await binding_rows.move_pending_to_owner(conn, host_id, wf_def_id, owner)
