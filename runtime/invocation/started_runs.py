"""The console's reads of a caller's own runs: the start runs they admitted, and one run's
tasks. Both apply the lifecycle tools' owner and disclosure rules (lifecycle.py)."""

from __future__ import annotations

from datetime import datetime

from runtime.invocation import disclosure, rules, store
from runtime.invocation.lifecycle import _disclosed, _own_run, _owned_by
from runtime.scheduler.store.inspection import ListedTask, select_tasks
from runtime.security import InvocationContext
from runtime.security.settings import SecuritySettings
from runtime.store import Database

MAX_PAGE = 100


async def started_runs(
    db: Database,
    ctx: InvocationContext,
    security: SecuritySettings | None,
    *,
    before: tuple[datetime, str] | None = None,
    limit: int = 25,
) -> tuple[list[store.OwnedRun], tuple[datetime, str] | None]:
    """The caller's start runs on their host, newest first, and the cursor of the next page.

    A run is listed only when workflow_get_status would show it to this caller now.
    """
    owner = (ctx.user_id, ctx.subject, rules.principal_of(ctx))
    size = max(1, min(limit, MAX_PAGE))
    async with db.transaction(read_only=True) as conn:
        rows = await store.select_started_runs(conn, ctx.host_id, owner, before, size + 1)
    allowed = disclosure.allowed_parts(ctx, security)
    visible = [
        run
        for run in rows[:size]
        if _owned_by(run, ctx)
        and disclosure.STATUS in disclosure.visible_parts(run.disclosure_ceiling, allowed)
    ]
    if len(rows) <= size:
        return visible, None
    last = rows[size - 1]
    return visible, (last.created_ts, last.process_id)


async def run_tasks(
    db: Database, ctx: InvocationContext, security: SecuritySettings | None, instance_id: str
) -> list[ListedTask]:
    """The tasks of one of the caller's runs in step order (the status part's visibility)."""
    run = await _own_run(db, ctx, instance_id)
    _disclosed(run, ctx, security, disclosure.STATUS)
    async with db.transaction(read_only=True) as conn:
        return await select_tasks(conn, ctx.host_id, run.process_id)
