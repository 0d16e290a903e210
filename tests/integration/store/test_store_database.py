"""Database: transactions, the runtime role, error translation, per-test isolation."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from runtime.errors import WorkflowError
from runtime.store import (
    Database,
    StoreUnavailable,
    register_constraint_error,
    retry_on_connection_error,
    wrap_errors,
)
from runtime.store.bootstrap import open_store
from runtime.store.settings import StoreSettings


async def admin_execute(url: str, *statements: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for statement in statements:
            await conn.execute(statement)


async def count(db: Database, table: str) -> int:
    async with db.transaction() as conn:
        row = await (await conn.execute(f"SELECT count(*) AS n FROM {table}")).fetchone()
    assert row is not None
    return int(row["n"])


async def test_a_transaction_commits_on_success_and_rows_are_dicts(
    db: Database, database_url: str
) -> None:
    await admin_execute(database_url, "CREATE TABLE notes (id int, body text)")
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO notes VALUES (%(id)s, %(body)s)", {"id": 1, "body": "a"})
    async with db.transaction() as conn:
        rows = await (await conn.execute("SELECT id, body FROM notes")).fetchall()
    assert rows == [{"id": 1, "body": "a"}]


async def test_a_transaction_rolls_back_when_the_block_raises(
    db: Database, database_url: str
) -> None:
    await admin_execute(database_url, "CREATE TABLE notes (id int)")
    with pytest.raises(RuntimeError, match="boom"):
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO notes VALUES (1)")
            raise RuntimeError("boom")
    assert await count(db, "notes") == 0


async def test_store_helpers_cannot_commit_inside_a_transaction(db: Database) -> None:
    with pytest.raises(psycopg.ProgrammingError):
        async with db.transaction() as conn:
            await conn.commit()


async def test_a_read_only_transaction_refuses_writes_and_the_option_does_not_leak(
    database_url: str,
) -> None:
    await admin_execute(database_url, "CREATE TABLE notes (id int)")
    # One connection, so the second transaction reuses the first one's connection.
    async with Database(database_url, min_size=1, max_size=1) as db:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            async with db.transaction(read_only=True) as conn:
                await conn.execute("INSERT INTO notes VALUES (1)")
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO notes VALUES (2)")
        assert await count(db, "notes") == 1


async def test_a_repeatable_read_transaction_sees_one_snapshot(
    db: Database, database_url: str
) -> None:
    await admin_execute(database_url, "CREATE TABLE notes (id int)")
    async with db.transaction(read_only=True, isolation="repeatable read") as conn:
        level = await (await conn.execute("SHOW transaction_isolation")).fetchone()
        before = await (await conn.execute("SELECT count(*) AS n FROM notes")).fetchone()
        await admin_execute(database_url, "INSERT INTO notes VALUES (1)")
        after = await (await conn.execute("SELECT count(*) AS n FROM notes")).fetchone()
    assert level == {"transaction_isolation": "repeatable read"}
    assert before == after == {"n": 0}
    assert await count(db, "notes") == 1


async def test_connection_is_autocommit_and_receives_notifications(db: Database) -> None:
    async with db.connection() as listener:
        assert listener.autocommit
        await listener.execute("LISTEN wake_up")
        async with db.transaction() as conn:
            await conn.execute("SELECT pg_notify('wake_up', 'task:1')")
        received = [n async for n in listener.notifies(timeout=5, stop_after=1)]
        await listener.execute("UNLISTEN *")
    assert [(n.channel, n.payload) for n in received] == [("wake_up", "task:1")]


async def test_the_pool_runs_as_the_runtime_role(db: Database) -> None:
    async with db.transaction() as conn:
        row = await (await conn.execute("SELECT current_user, session_user")).fetchone()
    assert row is not None
    assert row["current_user"] == "workflow_runtime"
    assert row["session_user"] != "workflow_runtime"


async def test_the_runtime_role_cannot_update_an_insert_only_table(
    db: Database, database_url: str
) -> None:
    await admin_execute(
        database_url,
        "CREATE TABLE history (id int PRIMARY KEY, what text)",
        "REVOKE UPDATE, DELETE ON history FROM workflow_runtime",
    )
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO history VALUES (1, 'created')")
        assert await (await conn.execute("SELECT what FROM history")).fetchall() == [
            {"what": "created"}
        ]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        async with db.transaction() as conn:
            await conn.execute("UPDATE history SET what = 'rewritten'")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        async with db.transaction() as conn:
            await conn.execute("DELETE FROM history")


async def test_tables_created_by_the_migration_owner_are_usable_by_the_runtime_role(
    db: Database, database_url: str
) -> None:
    await admin_execute(database_url, "CREATE TABLE items (id bigserial PRIMARY KEY, v int)")
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO items (v) VALUES (1)")
        await conn.execute("UPDATE items SET v = 2")
        await conn.execute("DELETE FROM items")


async def test_a_named_constraint_violation_becomes_its_registered_workflow_error(
    db: Database, database_url: str
) -> None:
    # The registry is process-wide and has no removal: a name of this run's own cannot
    # collide with a mapping another test (or a rerun of this one) registered.
    constraint = f"keys_k_unique_{uuid.uuid4().hex}"
    await admin_execute(
        database_url,
        f"CREATE TABLE keys (k text, CONSTRAINT {constraint} UNIQUE (k))",
        "INSERT INTO keys VALUES ('a')",
    )
    register_constraint_error(
        constraint,
        lambda exc: WorkflowError("WORKFLOW_IDEMPOTENCY_CONFLICT", "key already used"),
    )
    with pytest.raises(WorkflowError) as raised:
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO keys VALUES ('a')")
    assert raised.value.code == "WORKFLOW_IDEMPOTENCY_CONFLICT"
    assert isinstance(raised.value.__cause__, psycopg.errors.UniqueViolation)


async def test_an_unregistered_constraint_violation_propagates_unchanged(
    db: Database, database_url: str
) -> None:
    await admin_execute(
        database_url,
        "CREATE TABLE keys (k text, CONSTRAINT other_unique UNIQUE (k))",
        "INSERT INTO keys VALUES ('a')",
    )
    with pytest.raises(psycopg.errors.UniqueViolation):
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO keys VALUES ('a')")


def test_registering_a_second_mapping_for_one_constraint_is_refused() -> None:
    def first(exc: psycopg.Error) -> WorkflowError:
        return WorkflowError("WORKFLOW_NOT_FOUND", "x")

    constraint = f"twice_registered_{uuid.uuid4().hex}"
    register_constraint_error(constraint, first)
    register_constraint_error(constraint, first)
    with pytest.raises(ValueError, match="already has an error mapping"):
        register_constraint_error(constraint, lambda exc: first(exc))


async def test_a_terminated_session_becomes_store_unavailable(
    db: Database, database_url: str
) -> None:
    with pytest.raises(StoreUnavailable) as raised:
        async with db.transaction() as conn:
            await admin_execute(
                database_url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE usename = current_user AND pid <> pg_backend_pid() "
                "AND datname = current_database()",
            )
            await conn.execute("SELECT 1")
    assert raised.value.code == "WORKFLOW_INVOCATION_UNAVAILABLE"
    assert raised.value.retryable


async def test_an_unreachable_server_becomes_store_unavailable(tmp_path: object) -> None:
    with pytest.raises(StoreUnavailable), wrap_errors():
        await psycopg.AsyncConnection.connect(
            f"postgresql://postgres@/nowhere?host={tmp_path}&port=1&connect_timeout=2"
        )


async def test_connection_errors_are_retried_and_statement_errors_are_not() -> None:
    calls: list[str] = []

    async def flaky() -> str:
        calls.append("flaky")
        if len(calls) < 3:
            raise psycopg.OperationalError("connection lost")
        return "done"

    assert await retry_on_connection_error(flaky, attempts=3, base_delay_s=0.001) == "done"
    assert len(calls) == 3

    async def refused() -> str:
        calls.append("refused")
        raise psycopg.errors.UniqueViolation("duplicate")

    with pytest.raises(psycopg.errors.UniqueViolation):
        await retry_on_connection_error(refused, attempts=3, base_delay_s=0.001)
    assert calls.count("refused") == 1


@pytest.mark.parametrize("run", ["first", "second"])
async def test_each_test_gets_its_own_copy_of_the_template(
    db: Database, database_url: str, run: str
) -> None:
    # Whichever run comes second would see the first run's table if databases were shared.
    async with db.transaction() as conn:
        row = await (await conn.execute("SELECT to_regclass('isolation_probe') AS t")).fetchone()
    assert row == {"t": None}
    await admin_execute(database_url, "CREATE TABLE isolation_probe (run text)")
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO isolation_probe VALUES (%s)", (run,))
        applied = await (
            await conn.execute("SELECT count(*) AS n FROM schema_migrations")
        ).fetchone()
    assert applied is not None and applied["n"] >= 1


async def test_pools_of_many_tests_can_run_concurrently(database_url: str) -> None:
    async with Database(database_url, min_size=2, max_size=4) as db:

        async def one(i: int) -> int:
            async with db.transaction() as conn:
                row = await (await conn.execute("SELECT %s::int AS i", (i,))).fetchone()
            assert row is not None
            return int(row["i"])

        assert sorted(await asyncio.gather(*(one(i) for i in range(10)))) == list(range(10))


async def test_open_store_migrates_and_opens_a_runtime_role_pool(database_url: str) -> None:
    settings = StoreSettings(database_url=database_url, pool_min_size=1, pool_max_size=2)
    store = await open_store(settings)
    try:
        async with store.database.transaction() as conn:
            row = await (await conn.execute("SELECT current_user AS u")).fetchone()
        assert row == {"u": "workflow_runtime"}
        assert store.embedded is None
    finally:
        await store.close()
