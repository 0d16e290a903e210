"""The migration runner against real PostgreSQL."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from runtime.store import Database, MigrationError, migrate
from runtime.store.migrations import DEFAULT_DIRECTORY, FUNCTIONS, discover_functions, summary
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


async def installs(url: str) -> list[tuple[object, ...]]:
    return await rows(url, "SELECT name, checksum FROM schema_function_history ORDER BY id")


async def answer(url: str, query: str) -> object:
    return (await rows(url, query))[0][0]


def write_function(directory: Path, name: str, text: str) -> None:
    (directory / FUNCTIONS).mkdir(exist_ok=True)
    write(directory / FUNCTIONS, name, text)


def answers(n: int) -> str:
    """A function file defining answer() as n."""
    return f"CREATE OR REPLACE FUNCTION answer() RETURNS int LANGUAGE sql AS 'SELECT {n}';\n"


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


async def test_function_files_are_installed_after_the_numbered_migrations_and_recorded(
    empty_database: str, tmp_path: Path
) -> None:
    write(tmp_path, "0001_numbers.sql", "CREATE TABLE numbers (n int);")
    # A SQL body is checked as it is created: numbers must exist by then.
    write_function(
        tmp_path,
        "counting.sql",
        "CREATE OR REPLACE FUNCTION how_many() RETURNS bigint LANGUAGE sql\n"
        "AS 'SELECT count(*) FROM numbers';\n",
    )
    write_function(tmp_path, "answering.sql", answers(41))
    done = await migrate(empty_database, tmp_path)
    assert [f.path.name for f in done] == ["0001_numbers.sql", "answering.sql", "counting.sql"]
    assert summary(done) == "applied 1 migration(s), installed 2 function file(s)"
    assert await answer(empty_database, "SELECT answer()") == 41
    assert await answer(empty_database, "SELECT how_many()") == 0
    assert [name for name, _ in await installs(empty_database)] == ["answering", "counting"]
    assert await versions(empty_database) == [(1, "numbers")]


async def test_an_unchanged_function_file_is_not_installed_again(
    empty_database: str, tmp_path: Path
) -> None:
    write_function(tmp_path, "answering.sql", answers(41))
    await migrate(empty_database, tmp_path)
    assert await migrate(empty_database, tmp_path) == []
    assert len(await installs(empty_database)) == 1


async def test_an_edited_function_file_is_installed_again_and_each_install_recorded(
    empty_database: str, tmp_path: Path
) -> None:
    write_function(tmp_path, "answering.sql", answers(41))
    write_function(tmp_path, "other.sql", answers(0).replace("answer()", "other()"))
    await migrate(empty_database, tmp_path)
    write_function(tmp_path, "answering.sql", answers(42))
    assert [f.path.name for f in await migrate(empty_database, tmp_path)] == ["answering.sql"]
    assert await answer(empty_database, "SELECT answer()") == 42
    history = await installs(empty_database)
    assert [name for name, _ in history] == ["answering", "other", "answering"]
    assert history[0][1] != history[2][1]
    # Back to the first text: a new install (the last one recorded counts).
    write_function(tmp_path, "answering.sql", answers(41))
    assert [f.path.name for f in await migrate(empty_database, tmp_path)] == ["answering.sql"]
    assert await answer(empty_database, "SELECT answer()") == 41


async def test_a_run_that_applies_a_numbered_migration_installs_every_function_file(
    empty_database: str, tmp_path: Path
) -> None:
    write_function(tmp_path, "answering.sql", answers(41))
    await migrate(empty_database, tmp_path)
    # A numbered migration may replace or drop an authored function; the files win again.
    write(tmp_path, "0001_drop.sql", "DROP FUNCTION IF EXISTS answer();")
    done = await migrate(empty_database, tmp_path)
    assert [f.path.name for f in done] == ["0001_drop.sql", "answering.sql"]
    assert await answer(empty_database, "SELECT answer()") == 41


async def test_a_failing_function_file_installs_none_of_them_and_records_nothing(
    empty_database: str, tmp_path: Path
) -> None:
    write_function(tmp_path, "answering.sql", answers(41))
    await migrate(empty_database, tmp_path)
    before = await installs(empty_database)
    write(tmp_path, "0001_numbers.sql", "CREATE TABLE numbers (n int);")
    write_function(tmp_path, "answering.sql", answers(42))
    write_function(
        tmp_path,
        "broken.sql",
        "CREATE OR REPLACE FUNCTION fine() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
        "CREATE OR REPLACE FUNCTION broken() RETURNS int LANGUAGE sql AS 'SELECT missing';\n",
    )
    with pytest.raises(MigrationError, match=r"functions/broken\.sql failed: .*missing"):
        await migrate(empty_database, tmp_path)
    # The numbered migration committed on its own; of the function files nothing stays.
    assert await versions(empty_database) == [(1, "numbers")]
    assert await answer(empty_database, "SELECT answer()") == 41
    assert await answer(empty_database, "SELECT to_regprocedure('fine()') IS NULL") is True
    assert await installs(empty_database) == before
    write_function(tmp_path, "broken.sql", answers(7).replace("answer()", "broken()"))
    done = await migrate(empty_database, tmp_path)
    assert [f.path.name for f in done] == ["answering.sql", "broken.sql"]
    assert await answer(empty_database, "SELECT answer() + broken()") == 49


async def test_a_numbered_migration_calling_an_authored_function_is_refused_before_anything_runs(
    empty_database: str, tmp_path: Path
) -> None:
    write(tmp_path, "0001_first.sql", "CREATE TABLE first ();")
    write(tmp_path, "0002_uses.sql", "CREATE TABLE answers (n int DEFAULT answer());")
    write_function(tmp_path, "answering.sql", answers(41))
    with pytest.raises(MigrationError, match=r"0002_uses\.sql uses answer, which functions/"):
        await migrate(empty_database, tmp_path)
    assert not await table_exists(empty_database, "first")
    # Inside a PL/pgSQL body the call is resolved when it runs: fine.
    write(
        tmp_path,
        "0002_uses.sql",
        "CREATE FUNCTION twice() RETURNS int LANGUAGE plpgsql AS $$\n"
        "BEGIN RETURN 2 * answer(); END $$;\n",
    )
    await migrate(empty_database, tmp_path)
    assert await answer(empty_database, "SELECT twice()") == 82


async def test_concurrent_runners_install_each_function_file_exactly_once(
    empty_database: str, tmp_path: Path
) -> None:
    write(tmp_path, "0001_slow.sql", "SELECT pg_sleep(0.2);")
    write_function(tmp_path, "answering.sql", answers(41))
    results = await asyncio.gather(*(migrate(empty_database, tmp_path) for _ in range(4)))
    assert sorted(len(result) for result in results) == [0, 0, 0, 2]
    assert len(await installs(empty_database)) == 1


async def test_an_upgraded_database_ends_as_a_fresh_one(
    pg_cluster: PgCluster, empty_database: str, database_url: str, tmp_path: Path
) -> None:
    # The release before function files: its numbered migrations, applied by its runner (which
    # knew no function history); then this release's migrate.
    previous = tmp_path / "previous"
    previous.mkdir()
    for path in Path(DEFAULT_DIRECTORY).glob("[0-9][0-9][0-9][0-9]_*.sql"):
        if path.name < "0086":
            shutil.copy(path, previous / path.name)
    await migrate(empty_database, previous)
    async with await psycopg.AsyncConnection.connect(empty_database, autocommit=True) as conn:
        await conn.execute("DROP TABLE schema_function_history")
    done = await migrate(empty_database, DEFAULT_DIRECTORY)
    authored = [f.path.name for f in discover_functions(DEFAULT_DIRECTORY)]
    # 0086 and every numbered migration after it, then the function files.
    later = sorted(
        p.name
        for p in Path(DEFAULT_DIRECTORY).glob("[0-9][0-9][0-9][0-9]_*.sql")
        if p.name >= "0086"
    )
    assert [f.path.name for f in done] == [*later, *authored]
    assert dump_schema(empty_database) == dump_schema(database_url)
    privileges = (
        "SELECT c.relname, c.relacl::text FROM pg_class c"
        " WHERE c.relname LIKE 'schema_%' ORDER BY 1"
    )
    functions = (
        "SELECT p.oid::regprocedure::text, p.proacl::text, p.proconfig::text FROM pg_proc p"
        " WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1"
    )
    for query in (privileges, functions):
        assert await rows(empty_database, query) == await rows(database_url, query)


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
