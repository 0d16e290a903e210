"""Rows as structs, and a statement followed by another in the same round trip."""

from __future__ import annotations

import msgspec
import psycopg
import pytest

from runtime.store import Database, fetch_one_built_then


class Inserted(msgspec.Struct, frozen=True):
    """The row an INSERT ... RETURNING gives back."""

    id: int


async def ids(db: Database) -> list[int]:
    async with db.connection() as conn:
        rows = await (await conn.execute("SELECT id FROM marks ORDER BY id")).fetchall()
    return [row["id"] for row in rows]


@pytest.fixture
async def marks(database_url: str) -> None:
    """A table the runtime role may write."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("CREATE TABLE marks (id int PRIMARY KEY)")
        await conn.execute("GRANT SELECT, INSERT ON marks TO workflow_runtime")


@pytest.mark.usefixtures("marks")
async def test_the_first_statement_commits_before_the_second_runs(db: Database) -> None:
    async with db.connection() as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            await fetch_one_built_then(
                conn,
                "INSERT INTO marks VALUES (%(id)s) RETURNING id",
                {"id": 1},
                Inserted,
                ("SELECT 1 / 0", {}),
            )
        # The connection is usable again, outside any transaction.
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    # In one transaction the second statement's error would have rolled the insert back.
    assert await ids(db) == [1]


@pytest.mark.usefixtures("marks")
async def test_the_second_statement_runs_when_the_first_fails(db: Database) -> None:
    async with db.connection() as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            await fetch_one_built_then(
                conn,
                "SELECT 1 / 0 AS id",
                {},
                Inserted,
                ("INSERT INTO marks VALUES (%(id)s)", {"id": 2}),
            )
    assert await ids(db) == [2]


@pytest.mark.usefixtures("marks")
async def test_the_first_statements_row_is_returned(db: Database) -> None:
    async with db.connection() as conn:
        row = await fetch_one_built_then(
            conn,
            "INSERT INTO marks VALUES (%(id)s) RETURNING id",
            {"id": 3},
            Inserted,
            ("INSERT INTO marks VALUES (%(id)s)", {"id": 4}),
        )
    assert row == Inserted(3)
    assert await ids(db) == [3, 4]
