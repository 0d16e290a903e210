"""The migration runner against real PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from runtime.store import Database, MigrationError, migrate
from runtime.store.migrations import DEFAULT_DIRECTORY
from runtime.store.snapshot import SNAPSHOT_FILE, dump_schema
from tests.conftest import PgCluster


@pytest.fixture
async def empty_database(pg_cluster: PgCluster) -> AsyncIterator[str]:
    """Conninfo of a brand-new database with no migrations applied."""
    name = pg_cluster.new_name("empty")
    url = await pg_cluster.create_database(name)
    try:
        yield url
    finally:
        await pg_cluster.drop_database(name)


def write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(text, encoding="utf-8")


async def rows(url: str, query: str) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(query)
        return await cur.fetchall()


async def versions(url: str) -> list[tuple[object, ...]]:
    return await rows(url, "SELECT version, name FROM schema_migrations ORDER BY version")


async def table_exists(url: str, table: str) -> bool:
    found = await rows(url, f"SELECT to_regclass('{table}') IS NOT NULL")
    return bool(found[0][0])


async def test_files_apply_in_version_order_and_applied_ones_are_skipped(
    empty_database: str, tmp_path: Path
) -> None:
    write(tmp_path, "0010_child.sql", "CREATE TABLE child (p int REFERENCES parent (id));")
    write(tmp_path, "0002_parent.sql", "CREATE TABLE parent (id int PRIMARY KEY);")
    applied = await migrate(empty_database, tmp_path)
    assert [f.version for f in applied] == [2, 10]
    assert await migrate(empty_database, tmp_path) == []
    assert await versions(empty_database) == [(2, "parent"), (10, "child")]


async def test_a_new_lower_version_added_later_is_still_applied(
    empty_database: str, tmp_path: Path
) -> None:
    write(tmp_path, "0020_late_range.sql", "CREATE TABLE late ();")
    await migrate(empty_database, tmp_path)
    write(tmp_path, "0003_early_range.sql", "CREATE TABLE early ();")
    applied = await migrate(empty_database, tmp_path)
    assert [f.name for f in applied] == ["early_range"]
    assert await table_exists(empty_database, "early")


async def test_an_edited_applied_file_is_refused_and_nothing_else_runs(
    empty_database: str, tmp_path: Path
) -> None:
    write(tmp_path, "0001_first.sql", "CREATE TABLE first ();")
    await migrate(empty_database, tmp_path)
    write(tmp_path, "0001_first.sql", "CREATE TABLE first (changed int);")
    write(tmp_path, "0002_second.sql", "CREATE TABLE second ();")
    with pytest.raises(MigrationError, match=r"0001_first\.sql was edited"):
        await migrate(empty_database, tmp_path)
    assert await versions(empty_database) == [(1, "first")]
    assert not await table_exists(empty_database, "second")


async def test_a_removed_applied_file_is_refused(empty_database: str, tmp_path: Path) -> None:
    write(tmp_path, "0001_first.sql", "CREATE TABLE first ();")
    await migrate(empty_database, tmp_path)
    (tmp_path / "0001_first.sql").unlink()
    with pytest.raises(MigrationError, match="0001_first was removed"):
        await migrate(empty_database, tmp_path)


async def test_a_failing_file_records_no_version_and_leaves_no_partial_ddl(
    empty_database: str, tmp_path: Path
) -> None:
    write(tmp_path, "0001_good.sql", "CREATE TABLE good ();")
    write(tmp_path, "0002_bad.sql", "CREATE TABLE half_done (id int);\nSELECT 1 / 0;")
    with pytest.raises(MigrationError, match=r"0002_bad\.sql failed: division by zero"):
        await migrate(empty_database, tmp_path)
    assert await versions(empty_database) == [(1, "good")]
    assert not await table_exists(empty_database, "half_done")
    write(tmp_path, "0002_bad.sql", "CREATE TABLE half_done (id int);")
    assert [f.version for f in await migrate(empty_database, tmp_path)] == [2]


async def test_concurrent_runners_apply_each_file_exactly_once(
    empty_database: str, tmp_path: Path
) -> None:
    # The sleep widens the window in which unserialized runners would collide.
    write(tmp_path, "0001_slow.sql", "SELECT pg_sleep(0.2);\nCREATE TABLE once (id int);")
    write(tmp_path, "0002_counter.sql", "CREATE TABLE counter (n int);")
    results = await asyncio.gather(*(migrate(empty_database, tmp_path) for _ in range(4)))
    applied_counts = sorted(len(result) for result in results)
    assert applied_counts == [0, 0, 0, 2]
    assert await versions(empty_database) == [(1, "slow"), (2, "counter")]


async def test_nontx_files_run_outside_a_transaction(empty_database: str, tmp_path: Path) -> None:
    write(tmp_path, "0001_table.sql", "CREATE TABLE items (id int, tag text);")
    write(
        tmp_path,
        "0002_items_indexes.nontx.sql",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS items_id_idx ON items (id);\n"
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS items_tag_idx ON items (tag);\n",
    )
    await migrate(empty_database, tmp_path)
    indexes = await rows(
        empty_database, "SELECT indexname FROM pg_indexes WHERE tablename = 'items' ORDER BY 1"
    )
    assert indexes == [("items_id_idx",), ("items_tag_idx",)]
    assert await versions(empty_database) == [(1, "table"), (2, "items_indexes")]


async def test_concurrent_index_in_a_transactional_file_is_refused(
    empty_database: str, tmp_path: Path
) -> None:
    write(tmp_path, "0001_table.sql", "CREATE TABLE items (id int);")
    write(tmp_path, "0002_index.sql", "CREATE INDEX CONCURRENTLY items_id_idx ON items (id);")
    with pytest.raises(MigrationError, match="transaction block"):
        await migrate(empty_database, tmp_path)
    assert await versions(empty_database) == [(1, "table")]


async def test_the_role_migration_runs_on_a_second_database_of_the_cluster(
    empty_database: str, database_url: str
) -> None:
    # The template already created the cluster-wide role; this run must tolerate that.
    applied = await migrate(empty_database, DEFAULT_DIRECTORY)
    assert applied[0].name == "roles"


async def test_a_fresh_migration_matches_the_committed_schema_snapshot(database_url: str) -> None:
    path = Path(DEFAULT_DIRECTORY) / SNAPSHOT_FILE
    assert path.exists(), f"migrations/{SNAPSHOT_FILE} is missing"
    committed = path.read_text(encoding="utf-8")
    assert dump_schema(database_url) == committed, (
        "schema changed: run `.venv/bin/python -m runtime.store.migrations snapshot` "
        "and commit migrations/schema.snapshot.sql"
    )


async def test_the_run_state_view_is_read_only_for_the_runtime_role(db: Database) -> None:
    async with db.transaction() as conn:
        await conn.execute("SELECT count(*) FROM workflow_run_state")
    for statement in (
        "UPDATE workflow_run_state SET state = 'FAILED'",
        "DELETE FROM workflow_run_state",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with db.transaction() as conn:
                await conn.execute(statement)
