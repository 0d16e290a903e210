"""Storage of the publication domain: each helper takes a connection and never commits.

``QUERIES`` holds the named blocks of ``queries.sql``, loaded once for every row module here.
Rows come back as frozen structs. A JSON column the contract types (a binding, its write tasks,
annotations, warnings) decodes into its ``generated.models`` type, so a field renamed in the
contract fails type-checking here too; definition documents and stored receipts stay JSON
objects (the DSL and each tool's output define them, not one contract type).
Importing the package registers the errors the tables' named constraints become.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from runtime.publication.store import constraint_errors  # noqa: F401 (registers the errors)
from runtime.store import Connection, load_queries

QUERIES = load_queries(Path(__file__).with_name("queries.sql"))

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
