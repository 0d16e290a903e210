"""Rows as frozen structs: a statement's rows converted into the struct its store names.

A JSON column whose contract type is known is a field of that ``generated.models`` type, so the
conversion checks it and a field renamed in the contract fails type-checking in the store code
that reads it.

``fetch_one``/``fetch_all`` convert each row (msgspec checks every field). On a hot path whose
columns already arrive as the struct's types (uuid, timestamptz, jsonb, integers),
``fetch_built``/``fetch_one_built`` have the driver build the struct from the columns instead:
no row dict and no conversion, so a typed row costs what a dict row did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
from psycopg.rows import kwargs_row

from runtime.store.database import Connection
from runtime.store.psycopg_internals import queue_sync

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


async def fetch_built(
    conn: Connection, query: str, params: Mapping[str, Any], row_type: type[RowT]
) -> list[RowT]:
    """Every row as row_type, built by the driver from the columns (their names are its fields)."""
    async with conn.cursor(row_factory=kwargs_row(row_type)) as cursor:
        await cursor.execute(query, params)
        return await cursor.fetchall()


async def fetch_one_built(
    conn: Connection, query: str, params: Mapping[str, Any], row_type: type[RowT]
) -> RowT | None:
    """The first row as row_type built by the driver (as fetch_built), or None."""
    async with conn.cursor(row_factory=kwargs_row(row_type)) as cursor:
        await cursor.execute(query, params)
        return await cursor.fetchone()


async def fetch_one_built_then(
    conn: Connection,
    query: str,
    params: Mapping[str, Any],
    row_type: type[RowT],
    then: tuple[str, Mapping[str, Any]],
) -> RowT | None:
    """fetch_one_built on an autocommit connection, then `then` in a transaction of its own.

    Both go out in one round trip: a Sync between them commits the first statement before the
    second starts, so the second's locks (a NOTIFY's queue lock) are never held across the
    first one's commit. An error of the first statement does not stop the second.
    """
    then_query, then_params = then
    cursor = conn.cursor(row_factory=kwargs_row(row_type))
    try:
        async with conn.pipeline() as pipeline:
            await cursor.execute(query, params)
            # The public sync() would wait for the first result (a round trip): queue the Sync
            # only; the pipeline's exit sends everything and reads both results.
            queue_sync(pipeline)
            await conn.execute(then_query, then_params)
        return await cursor.fetchone()
    finally:
        await cursor.close()
