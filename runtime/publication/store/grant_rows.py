"""Rows of definition grant sets and their sync state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime.publication.store import QUERIES
from runtime.store import Connection


@dataclass(frozen=True, slots=True)
class GrantSyncState:
    """The last applied grant revision of a definition and its set's digest."""

    source_revision: int
    grants_digest: str


def _state(row: dict[str, Any] | None) -> GrantSyncState | None:
    return None if row is None else GrantSyncState(row["source_revision"], row["grants_digest"])


async def insert_sync(conn: Connection, sync: dict[str, Any]) -> GrantSyncState | None:
    """Insert the sync row; None when it already exists."""
    cursor = await conn.execute(QUERIES["insert_grant_sync"], sync)
    return _state(await cursor.fetchone())


async def lock_sync(conn: Connection, host_id: str, wf_def_id: str) -> GrantSyncState | None:
    """Lock and read the sync row (FOR UPDATE)."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    cursor = await conn.execute(QUERIES["lock_grant_sync"], params)
    return _state(await cursor.fetchone())


async def update_sync(conn: Connection, sync: dict[str, Any]) -> GrantSyncState | None:
    """Record a higher applied revision; None when the stored one is not lower."""
    cursor = await conn.execute(QUERIES["update_grant_sync"], sync)
    return _state(await cursor.fetchone())


async def replace_grants(
    conn: Connection, host_id: str, wf_def_id: str, grants: Sequence[dict[str, Any]]
) -> None:
    """Delete a definition's grant set and write grants in its place."""
    await conn.execute(
        QUERIES["delete_definition_grants"], {"host_id": host_id, "wf_def_id": wf_def_id}
    )
    if grants:
        async with conn.cursor() as cursor:
            await cursor.executemany(QUERIES["insert_definition_grant"], grants)


async def select_grants(conn: Connection, host_id: str, wf_def_id: str) -> list[dict[str, Any]]:
    """The live grant set of a definition, ordered by grant id."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    cursor = await conn.execute(QUERIES["select_definition_grants"], params)
    return list(await cursor.fetchall())
