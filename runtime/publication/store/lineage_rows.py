"""Rows that relate a Tool's revisions to each other and to what they depend on.

The rollback candidate, the reverse dependency index (which active revisions of other Tools pin
a version of a Tool), and what the drift checks compare an active revision with: the versions
Tools have active now and the secrets a host still holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from runtime.publication.store import QUERIES, fetch_all, fetch_one
from runtime.store import Connection


class PinningDependent(msgspec.Struct, frozen=True):
    """An active revision of another Tool that pins a version of the Tool in question."""

    tool_id: str
    tool_name: str
    binding_id: str
    pinned_version: str


class ActiveBinding(msgspec.Struct, frozen=True):
    """An active revision with its pinned definition version, as the drift checks read it."""

    host_id: str
    binding_id: str
    tool_id: str
    wf_def_id: str
    workflow_version: str
    version_status: str
    document: dict[str, Any]


async def select_rollback_candidate(
    conn: Connection, host_id: str, tool_id: str, active_digest: str
) -> str | None:
    """The revision a rollback restores (see the query), or None."""
    params = {"host_id": host_id, "tool_id": tool_id, "active_digest": active_digest}
    row = await fetch_one(conn, QUERIES["select_rollback_candidate"], params, _BindingId)
    return None if row is None else row.binding_id


async def select_pinning_dependents(
    conn: Connection, host_id: str, nested_tool_id: str, version: str
) -> list[PinningDependent]:
    """Active revisions of other Tools pinning nested_tool_id at version, by Tool name."""
    params = {"host_id": host_id, "nested_tool_id": nested_tool_id, "version": version}
    return await fetch_all(conn, QUERIES["select_pinning_dependents"], params, PinningDependent)


async def select_active_bindings(
    conn: Connection, host_id: str | None = None, tool_id: str | None = None
) -> list[ActiveBinding]:
    """Active revisions of one host (or all hosts), optionally of one Tool."""
    params = {"host_id": host_id, "tool_id": tool_id}
    return await fetch_all(conn, QUERIES["select_active_bindings"], params, ActiveBinding)


async def select_promoted_versions(
    conn: Connection, host_id: str, tool_ids: Sequence[str]
) -> dict[str, str | None]:
    """toolId -> the version it has active now (None: a head without an active revision).

    A Tool without a publication head on the host is not workflow-backed and is not listed.
    """
    params = {"host_id": host_id, "tool_ids": list(tool_ids)}
    rows = await fetch_all(conn, QUERIES["select_promoted_versions"], params, _Promoted)
    return {row.tool_id: row.workflow_version or None for row in rows}


async def select_live_secret_names(
    conn: Connection, host_id: str, names: Sequence[str]
) -> set[str]:
    """The names among names that the host holds live now."""
    params = {"host_id": host_id, "names": list(names)}
    rows = await fetch_all(conn, QUERIES["select_live_secret_names"], params, _Name)
    return {row.name for row in rows}


class _BindingId(msgspec.Struct, frozen=True):
    binding_id: str


class _Promoted(msgspec.Struct, frozen=True):
    tool_id: str
    workflow_version: str


class _Name(msgspec.Struct, frozen=True):
    name: str


class VersionContract(msgspec.Struct, frozen=True):
    """A Tool's schemas at one version: the revision's own, or None (the definition's)."""

    input_schema: Any
    output_schema: Any
    document: dict[str, Any]


async def select_version_contract(
    conn: Connection, host_id: str, tool_id: str, version: str
) -> VersionContract | None:
    """The contract of a Tool's most recently approved revision at version, or None."""
    params = {"host_id": host_id, "tool_id": tool_id, "version": version}
    return await fetch_one(conn, QUERIES["select_version_contract"], params, VersionContract)
