"""Rows of the host secret store: sealed values by (host, name), tombstoned on delete.

Values arrive and leave only sealed (key id, nonce, ciphertext): nothing here sees plaintext.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import msgspec

from runtime.publication.store import QUERIES, fetch_all, fetch_one
from runtime.security import SealedSecret
from runtime.store import Connection


class SecretLock(msgspec.Struct, frozen=True):
    """A locked secret row: its current (or last, when deleted) version."""

    version: int
    deleted: bool


class StoredVersion(msgspec.Struct, frozen=True):
    """What a put stored: the version and the row's timestamps."""

    version: int
    created_ts: datetime
    updated_ts: datetime


class SecretEntry(msgspec.Struct, frozen=True):
    """One live secret as listed (never its value)."""

    name: str
    version: int
    created_ts: datetime
    updated_ts: datetime
    updated_by: str
    definitions: list[str] | None = None  # the scope; None: every definition of the host


class SecretReference(msgspec.Struct, frozen=True):
    """A published (active) definition version that declares a secret name."""

    wf_def_id: str
    version: str
    name: str


class _Sealed(msgspec.Struct, frozen=True):
    version: int
    key_id: str
    nonce: bytes
    ciphertext: bytes
    definitions: list[str] | None = None


class _Live(msgspec.Struct, frozen=True):
    live: int


class _Name(msgspec.Struct, frozen=True):
    name: str
    definitions: list[str] | None = None


class _Version(msgspec.Struct, frozen=True):
    version: int


async def lock_secret(conn: Connection, host_id: str, name: str) -> SecretLock | None:
    """Lock and read a secret row of host (FOR UPDATE), tombstones included."""
    params = {"host_id": host_id, "name": name}
    return await fetch_one(conn, QUERIES["lock_secret"], params, SecretLock)


async def count_live_secrets(conn: Connection, host_id: str) -> int:
    """How many secrets the host holds."""
    row = await fetch_one(conn, QUERIES["count_live_secrets"], {"host_id": host_id}, _Live)
    return 0 if row is None else row.live


def _sealed_params(
    host_id: str,
    name: str,
    version: int,
    sealed: SealedSecret,
    actor: str,
    definitions: Sequence[str] | None,
) -> dict[str, object]:
    return {
        "scoped": definitions is not None,
        "definitions": None if definitions is None else list(definitions),
        "host_id": host_id,
        "name": name,
        "version": version,
        "key_id": sealed.key_id,
        "nonce": sealed.nonce,
        "ciphertext": sealed.ciphertext,
        "actor": actor,
    }


async def insert_secret(
    conn: Connection,
    host_id: str,
    name: str,
    sealed: SealedSecret,
    actor: str,
    definitions: Sequence[str] | None = None,
) -> StoredVersion | None:
    """Store version 1 of a name the host never held; None when a row already exists.

    definitions: the wfDefIds that may use it; None: every definition of the host.
    """
    params = _sealed_params(host_id, name, 1, sealed, actor, definitions)
    return await fetch_one(conn, QUERIES["insert_secret"], params, StoredVersion)


async def store_secret_version(
    conn: Connection,
    host_id: str,
    name: str,
    version: int,
    sealed: SealedSecret,
    actor: str,
    definitions: Sequence[str] | None = None,
) -> StoredVersion | None:
    """Replace the locked row's value with version (its stored version plus one).

    definitions None keeps a live secret's scope (every definition after a delete).
    """
    params = _sealed_params(host_id, name, version, sealed, actor, definitions)
    return await fetch_one(conn, QUERIES["store_secret_version"], params, StoredVersion)


async def tombstone_secret(conn: Connection, host_id: str, name: str, actor: str) -> int | None:
    """Drop a live secret's sealed value; its version, or None when the host holds no such name."""
    params = {"host_id": host_id, "name": name, "actor": actor}
    row = await fetch_one(conn, QUERIES["tombstone_secret"], params, _Version)
    return None if row is None else row.version


async def select_secret_page(
    conn: Connection, host_id: str, *, after: str | None, limit: int
) -> list[SecretEntry]:
    """Up to limit live secrets of host whose names sort after `after`, in name order."""
    params = {"host_id": host_id, "after": after, "limit": limit}
    return await fetch_all(conn, QUERIES["select_secret_page"], params, SecretEntry)


async def share_live_secret_names(
    conn: Connection, host_id: str, names: Sequence[str]
) -> dict[str, list[str] | None]:
    """The names among names that the host holds, with their scopes; rows locked FOR SHARE."""
    params = {"host_id": host_id, "names": list(names)}
    rows = await fetch_all(conn, QUERIES["share_live_secret_names"], params, _Name)
    return {row.name: row.definitions for row in rows}


async def select_secret_references(
    conn: Connection, host_id: str, names: Sequence[str]
) -> list[SecretReference]:
    """Active definition versions of host declaring any of names in use.secrets."""
    if not names:
        return []
    params = {"host_id": host_id, "names": list(names)}
    return await fetch_all(conn, QUERIES["select_secret_references"], params, SecretReference)


async def select_sealed_secret(
    conn: Connection, host_id: str, name: str
) -> tuple[int, SealedSecret, list[str] | None] | None:
    """The current version of a live host secret, its sealed value and scope, or None."""
    params = {"host_id": host_id, "name": name}
    row = await fetch_one(conn, QUERIES["select_sealed_secret"], params, _Sealed)
    if row is None:
        return None
    sealed = SealedSecret(key_id=row.key_id, nonce=row.nonce, ciphertext=row.ciphertext)
    return row.version, sealed, row.definitions
