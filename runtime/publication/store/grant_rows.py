"""Rows of definition grant sets and their sync state."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from generated.models import Grant
from runtime.publication.store import QUERIES, fetch_all, fetch_one
from runtime.store import Connection


class GrantSync(msgspec.Struct, frozen=True, kw_only=True):
    """A grant set's sync row as a sync writes it."""

    host_id: str
    wf_def_id: str
    source_revision: int
    grants_digest: str
    actor: str
    synced_by: str


class GrantSyncState(msgspec.Struct, frozen=True):
    """The last applied grant revision of a definition and its set's digest."""

    source_revision: int
    grants_digest: str


class LiveGrant(msgspec.Struct, frozen=True, kw_only=True):
    """One grant of a definition's live set as stored.

    Wider than the contract's Grant: the columns allow no version, no digest and no
    environment (no environment: every environment). published_tool_name is read, not
    stored: the MCP name under which the Tool tool_id names is published on this host now.
    """

    grant_id: str
    tool_id: str
    tool_version: str | None
    lightapi_digest: str | None
    allowed_environments: list[str]
    source_revision: int
    published_tool_name: str | None = None


async def insert_sync(conn: Connection, sync: GrantSync) -> GrantSyncState | None:
    """Insert the sync row; None when it already exists."""
    params = msgspec.structs.asdict(sync)
    return await fetch_one(conn, QUERIES["insert_grant_sync"], params, GrantSyncState)


async def lock_sync(conn: Connection, host_id: str, wf_def_id: str) -> GrantSyncState | None:
    """Lock and read the sync row (FOR UPDATE)."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    return await fetch_one(conn, QUERIES["lock_grant_sync"], params, GrantSyncState)


async def update_sync(conn: Connection, sync: GrantSync) -> GrantSyncState | None:
    """Record a higher applied revision; None when the stored one is not lower."""
    params = msgspec.structs.asdict(sync)
    return await fetch_one(conn, QUERIES["update_grant_sync"], params, GrantSyncState)


async def replace_grants(conn: Connection, sync: GrantSync, grants: Sequence[Grant]) -> None:
    """Delete a definition's grant set and write grants in its place, at the sync's revision."""
    await conn.execute(
        QUERIES["delete_definition_grants"], {"host_id": sync.host_id, "wf_def_id": sync.wf_def_id}
    )
    if not grants:
        return
    rows = [
        {
            "host_id": sync.host_id,
            "wf_def_id": sync.wf_def_id,
            "grant_id": grant.grant_id,
            "tool_id": grant.tool_id,
            "tool_version": grant.tool_version,
            "lightapi_digest": grant.lightapi_digest,
            "allowed_environments": sorted(grant.allowed_environments),
            "source_revision": sync.source_revision,
        }
        for grant in grants
    ]
    async with conn.cursor() as cursor:
        await cursor.executemany(QUERIES["insert_definition_grant"], rows)


async def select_grants(conn: Connection, host_id: str, wf_def_id: str) -> list[LiveGrant]:
    """The live grant set of a definition, ordered by grant id."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    return await fetch_all(conn, QUERIES["select_definition_grants"], params, LiveGrant)
