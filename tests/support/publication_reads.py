"""Reads of stored publication rows in the caller's host, for tests (no tool reads them so)."""

from __future__ import annotations

from runtime.publication.ids import normalize_uuid
from runtime.publication.store import definition_rows, grant_rows
from runtime.security import InvocationContext
from runtime.store import Database


async def read_definition_head(
    db: Database, ctx: InvocationContext, wf_def_id: str
) -> definition_rows.DefinitionHead | None:
    """The saved head of a definition in the caller's host, or None."""
    if (key := normalize_uuid(wf_def_id)) is None:
        return None
    async with db.transaction(read_only=True) as conn:
        return await definition_rows.select_head(conn, ctx.host_id, key)


async def read_definition_version(
    db: Database, ctx: InvocationContext, wf_def_id: str, version: str
) -> definition_rows.DefinitionVersion | None:
    """A published version with its document in the caller's host, or None."""
    if (key := normalize_uuid(wf_def_id)) is None:
        return None
    async with db.transaction(read_only=True) as conn:
        return await definition_rows.select_version(conn, ctx.host_id, key, version)


async def read_definition_grants(
    db: Database, ctx: InvocationContext, wf_def_id: str
) -> list[grant_rows.LiveGrant]:
    """The live grant set of a definition in the caller's host (grants are read live)."""
    if (key := normalize_uuid(wf_def_id)) is None:
        return []
    async with db.transaction(read_only=True) as conn:
        return await grant_rows.select_grants(conn, ctx.host_id, key)
