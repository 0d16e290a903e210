"""Rows of saved definition heads and published definition versions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from runtime.publication.store import QUERIES
from runtime.store import Connection


@dataclass(frozen=True, slots=True)
class HeadState:
    """What a saved head holds: its applied revision and digests."""

    source_revision: int
    definition_digest: str
    active: bool
    content_digest: str | None = None


@dataclass(frozen=True, slots=True)
class VersionState:
    """The mutable facts of a published version plus its immutable digests."""

    status: str
    definition_digest: str
    schema_digest: str
    binding_approval: str
    # The warnings its publication returned; None for a version published before they were kept.
    warnings: list[dict[str, str]] | None = None


async def _one(conn: Connection, query: str, params: dict[str, Any]) -> dict[str, Any] | None:
    cursor = await conn.execute(query, params)
    return await cursor.fetchone()


def _head_state(row: dict[str, Any]) -> HeadState:
    return HeadState(
        row["source_revision"], row["definition_digest"], row["active"], row.get("content_digest")
    )


async def insert_head(conn: Connection, head: dict[str, Any]) -> HeadState | None:
    """Insert a head; None when one already exists for (host, wfDefId)."""
    row = await _one(conn, QUERIES["insert_definition_head"], head)
    return None if row is None else _head_state(row)


async def lock_head(conn: Connection, host_id: str, wf_def_id: str) -> HeadState | None:
    """Lock and read a head (FOR UPDATE)."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    row = await _one(conn, QUERIES["lock_definition_head"], params)
    if row is None:
        return None
    return _head_state(row)


async def update_head(conn: Connection, head: dict[str, Any]) -> HeadState | None:
    """Overwrite a head with a higher revision; None when the stored revision is not lower."""
    row = await _one(conn, QUERIES["update_definition_head"], head)
    return None if row is None else _head_state(row)


async def select_head(conn: Connection, host_id: str, wf_def_id: str) -> dict[str, Any] | None:
    """The saved head of a definition, or None."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    return await _one(conn, QUERIES["select_definition_head"], params)


def _version_state(row: dict[str, Any] | None) -> VersionState | None:
    if row is None:
        return None
    return VersionState(
        row["status"],
        row["definition_digest"],
        row["schema_digest"],
        row["binding_approval"],
        row.get("publication_warnings"),
    )


async def insert_version(conn: Connection, version: dict[str, Any]) -> VersionState | None:
    """Insert a published version; None when (host, wfDefId, version) already exists."""
    params = {
        **version,
        **{
            key: json.dumps(version[key], ensure_ascii=False)
            for key in (
                "document",
                "normalized_document",
                "expression_digests",
                "publication_warnings",
            )
        },
    }
    return _version_state(await _one(conn, QUERIES["insert_definition_version"], params))


async def store_version_warnings(
    conn: Connection, host_id: str, wf_def_id: str, version: str, warnings: list[dict[str, str]]
) -> None:
    """Keep the warnings of a version published before they were stored (NULL only)."""
    params = {
        "host_id": host_id,
        "wf_def_id": wf_def_id,
        "version": version,
        "warnings": json.dumps(warnings, ensure_ascii=False),
    }
    await conn.execute(QUERIES["store_definition_version_warnings"], params)


async def lock_version(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> VersionState | None:
    """Lock and read a published version (FOR UPDATE)."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    return _version_state(await _one(conn, QUERIES["lock_definition_version"], params))


async def retire_version(
    conn: Connection,
    host_id: str,
    wf_def_id: str,
    version: str,
    *,
    retired_by: str,
    operation_id: str,
) -> VersionState | None:
    """Move an active version to retired; None when it was not active."""
    params = {
        "host_id": host_id,
        "wf_def_id": wf_def_id,
        "version": version,
        "retired_by": retired_by,
        "operation_id": operation_id,
    }
    return _version_state(await _one(conn, QUERIES["retire_definition_version"], params))


async def select_version(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> dict[str, Any] | None:
    """A published version with its normalized document, or None."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    return await _one(conn, QUERIES["select_definition_version"], params)
