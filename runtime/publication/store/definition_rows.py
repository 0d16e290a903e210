"""Rows of saved definition heads and published definition versions."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

from generated.models import BindingApproval, PublicationWarning
from runtime.publication.store import QUERIES, fetch_one, json_param
from runtime.store import Connection

# The values the table's CHECK constraint allows, as the contract names them.
VersionStatus = Literal["active", "retired"]


class Owner(msgspec.Struct, frozen=True):
    """A definition owner: a user id and an optional position id."""

    user_id: str
    position_id: str | None


class SavedHead(msgspec.Struct, frozen=True, kw_only=True):
    """A saved head as save writes it."""

    host_id: str
    wf_def_id: str
    source_revision: int
    namespace: str
    name: str
    version: str
    definition: str
    definition_digest: str
    # Digest of every saved field but actor: what an equal revision must repeat.
    content_digest: str
    lifecycle_status: str
    catalog_visible: bool
    owner: Owner
    active: bool
    actor: str
    saved_by: str
    # The text carries AI-authoring provenance (sticky on the row: migration 0115).
    ai_authored: bool = False


class HeadState(msgspec.Struct, frozen=True):
    """What a saved head holds: its applied revision and digests."""

    source_revision: int
    definition_digest: str
    active: bool
    content_digest: str | None = None


class DefinitionHead(msgspec.Struct, frozen=True, kw_only=True):
    """A saved head as stored."""

    host_id: str
    wf_def_id: str
    source_revision: int
    namespace: str
    name: str
    version: str
    definition: str
    definition_digest: str
    lifecycle_status: str | None
    catalog_visible: bool
    owner_user_id: str
    owner_position_id: str | None
    active: bool
    actor: str
    saved_by: str
    created_ts: datetime
    updated_ts: datetime


class ExpressionDigest(msgspec.Struct, frozen=True):
    """One expression of a version in walk order: its task pointer, text and digest."""

    task: str
    expression: str
    digest: str


class NewVersion(msgspec.Struct, frozen=True, kw_only=True):
    """A published version as publish writes it."""

    host_id: str
    wf_def_id: str
    version: str
    namespace: str
    name: str
    definition: str
    # The definition text as loaded (the document execution runs).
    document: dict[str, Any]
    definition_digest: str
    schema_digest: str
    binding_approval: BindingApproval
    owner: Owner
    published_by: str
    operation_id: str
    normalized_document: dict[str, Any]
    expression_digests: list[ExpressionDigest]
    warnings: list[PublicationWarning]


class VersionState(msgspec.Struct, frozen=True):
    """The mutable facts of a published version plus its immutable digests."""

    status: VersionStatus
    definition_digest: str
    schema_digest: str
    binding_approval: BindingApproval
    # The warnings its publication returned; None for a version published before they were kept.
    publication_warnings: list[PublicationWarning] | None = None


class DefinitionVersion(msgspec.Struct, frozen=True, kw_only=True):
    """A published version as stored, with its document."""

    host_id: str
    wf_def_id: str
    version: str
    namespace: str
    name: str
    definition: str
    document: dict[str, Any]
    definition_digest: str
    schema_digest: str
    binding_approval: BindingApproval
    status: VersionStatus
    owner_user_id: str
    owner_position_id: str | None
    published_by: str
    published_ts: datetime
    retired_by: str | None
    retired_ts: datetime | None


class PinnedVersion(msgspec.Struct, frozen=True):
    """The version a binding pins, as its rules read it under the share lock."""

    status: VersionStatus
    definition_digest: str
    schema_digest: str
    binding_approval: BindingApproval
    document: dict[str, Any]
    published_by: str


class _OwnerColumns(msgspec.Struct, frozen=True):
    owner_user_id: str
    owner_position_id: str | None


def _head_params(head: SavedHead) -> dict[str, Any]:
    return {
        "host_id": head.host_id,
        "wf_def_id": head.wf_def_id,
        "source_revision": head.source_revision,
        "namespace": head.namespace,
        "name": head.name,
        "version": head.version,
        "definition": head.definition,
        "definition_digest": head.definition_digest,
        "content_digest": head.content_digest,
        "lifecycle_status": head.lifecycle_status,
        "catalog_visible": head.catalog_visible,
        "owner_user_id": head.owner.user_id,
        "owner_position_id": head.owner.position_id,
        "active": head.active,
        "actor": head.actor,
        "saved_by": head.saved_by,
        "ai_authored": head.ai_authored,
    }


async def insert_head(conn: Connection, head: SavedHead) -> HeadState | None:
    """Insert a head; None when one already exists for (host, wfDefId)."""
    return await fetch_one(conn, QUERIES["insert_definition_head"], _head_params(head), HeadState)


async def lock_head(conn: Connection, host_id: str, wf_def_id: str) -> HeadState | None:
    """Lock and read a head (FOR UPDATE)."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    return await fetch_one(conn, QUERIES["lock_definition_head"], params, HeadState)


async def update_head(conn: Connection, head: SavedHead) -> HeadState | None:
    """Overwrite a head with a higher revision; None when the stored revision is not lower."""
    return await fetch_one(conn, QUERIES["update_definition_head"], _head_params(head), HeadState)


async def select_head(conn: Connection, host_id: str, wf_def_id: str) -> DefinitionHead | None:
    """The saved head of a definition, or None."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    return await fetch_one(conn, QUERIES["select_definition_head"], params, DefinitionHead)


async def lock_owner(conn: Connection, host_id: str, wf_def_id: str) -> Owner | None:
    """The saved head's current owner (FOR SHARE), or None when no head was saved."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id}
    row = await fetch_one(conn, QUERIES["lock_definition_owner"], params, _OwnerColumns)
    return None if row is None else Owner(row.owner_user_id, row.owner_position_id)


async def insert_version(conn: Connection, version: NewVersion) -> VersionState | None:
    """Insert a published version; None when (host, wfDefId, version) already exists."""
    params = {
        "host_id": version.host_id,
        "wf_def_id": version.wf_def_id,
        "version": version.version,
        "namespace": version.namespace,
        "name": version.name,
        "definition": version.definition,
        "document": json_param(version.document),
        "definition_digest": version.definition_digest,
        "schema_digest": version.schema_digest,
        "binding_approval": version.binding_approval,
        "owner_user_id": version.owner.user_id,
        "owner_position_id": version.owner.position_id,
        "published_by": version.published_by,
        "operation_id": version.operation_id,
        "normalized_document": json_param(version.normalized_document),
        "expression_digests": json_param(version.expression_digests),
        "publication_warnings": json_param(version.warnings),
    }
    return await fetch_one(conn, QUERIES["insert_definition_version"], params, VersionState)


async def store_version_warnings(
    conn: Connection,
    host_id: str,
    wf_def_id: str,
    version: str,
    warnings: list[PublicationWarning],
) -> None:
    """Keep the warnings of a version published before they were stored (NULL only)."""
    params = {
        "host_id": host_id,
        "wf_def_id": wf_def_id,
        "version": version,
        "warnings": json_param(warnings),
    }
    await conn.execute(QUERIES["store_definition_version_warnings"], params)


async def lock_version(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> VersionState | None:
    """Lock and read a published version (FOR UPDATE)."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    return await fetch_one(conn, QUERIES["lock_definition_version"], params, VersionState)


async def lock_pinned_version(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> PinnedVersion | None:
    """Lock a version a binding pins FOR SHARE (against retirement) and read it."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    return await fetch_one(conn, QUERIES["lock_version_for_share"], params, PinnedVersion)


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
    return await fetch_one(conn, QUERIES["retire_definition_version"], params, VersionState)


async def select_version(
    conn: Connection, host_id: str, wf_def_id: str, version: str
) -> DefinitionVersion | None:
    """A published version with its document, or None."""
    params = {"host_id": host_id, "wf_def_id": wf_def_id, "version": version}
    return await fetch_one(conn, QUERIES["select_definition_version"], params, DefinitionVersion)
