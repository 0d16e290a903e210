"""Rows as frozen structs: a statement's rows converted into the struct its store names.

A JSON column whose contract type is known is a field of that ``generated.models`` type, so the
conversion checks it and a field renamed in the contract fails type-checking in the store code
that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from runtime.store.database import Connection

RowT = TypeVar("RowT", bound=msgspec.Struct)


def json_param(value: object) -> str | None:
    """A value as JSON text for a ``::jsonb`` parameter (structs by their contract names)."""
    return None if value is None else msgspec.json.encode(value).decode("utf-8")


async def fetch_one(
    conn: Connection, query: str, params: Mapping[str, Any], row_type: type[RowT]
) -> RowT | None:
    """The statement's first row as row_type, or None when it returned none."""
    cursor = await conn.execute(query, params)
    row = await cursor.fetchone()
    return None if row is None else msgspec.convert(row, row_type)


async def fetch_all(
    conn: Connection, query: str, params: Mapping[str, Any], row_type: type[RowT]
) -> list[RowT]:
    """Every row of the statement as row_type."""
    cursor = await conn.execute(query, params)
    return [msgspec.convert(row, row_type) for row in await cursor.fetchall()]
