"""Commits per call: a sequential one-task sync workflow_invoke through POST /mcp commits <= 4.

The count comes from pg_stat_database.xact_commit of the test database. A backend publishes its
counters when it goes idle (rate-limited) and always when it exits, so each reading follows a
drain of the pool; readings run in another database. The commits of one call are those of a
window holding the call minus those of the same window without it (pool refills, listeners),
each the least of a few such windows (other commits in the database only ever add).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.execution import ExecutionSettings, WorkflowRuntime, close_waiter, configure_waiter
from runtime.mcp.app import attach_services, create_app
from runtime.scheduler import Executor, SchedulerSettings
from runtime.security import Authenticator, KeySet
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from runtime.store import Database
from tests.conftest import PgCluster
from tests.support.binding_builders import OWNER
from tests.support.invocation import client, invoke_args, ok, publish_tool
from tests.support.mcp import asgi_client

pytestmark = pytest.mark.requirement("001:Capacity And Availability")

MAX_COMMITS_PER_CALL = 4
# Nothing but notifications drives the executor, so no timer adds commits to the window.
QUIET = SchedulerSettings(
    lease_ms=60_000, renew_interval_ms=60_000, reap_interval_ms=60_000,
    sweep_interval_ms=60_000, poll_interval_ms=60_000,
)  # fmt: skip
POOL_SIZE = 4
# Longer than PGSTAT_MIN_INTERVAL (1 s): no live backend holds counters unpublished longer.
STATS_QUIET_S = 1.2
# Windows of each kind (without and with the call); the least of each is compared.
WINDOWS = 3


class Stats:
    """Readings of one database's counters, taken from the cluster's admin database."""

    def __init__(self, admin: psycopg.AsyncConnection[tuple[object, ...]], name: str) -> None:
        self._admin = admin
        self._name = name

    async def _value(self, query: str) -> int:
        row = await (await self._admin.execute(query, (self._name,))).fetchone()
        assert row is not None
        return int(str(row[0]))

    async def commits(self) -> int:
        """xact_commit once it has not moved for longer than a backend may hold its counters.

        An exiting backend publishes at once, but a live one (the pool's fresh connections, the
        listener) publishes when idle at most once a second (PGSTAT_MIN_INTERVAL): a reading
        that settled sooner (50 ms, as before) let a loaded CI machine count 3 commits of one
        window in the next (commits of one call: -3).
        """
        query = "SELECT xact_commit FROM pg_stat_database WHERE datname = %s"
        previous, settled_at = await self._value(query), asyncio.get_running_loop().time()
        while asyncio.get_running_loop().time() - settled_at < STATS_QUIET_S:
            await asyncio.sleep(0.05)
            current = await self._value(query)
            if current != previous:
                previous, settled_at = current, asyncio.get_running_loop().time()
        return previous

    async def until_sessions(self, predicate: str, expected: int) -> None:
        """Wait until exactly `expected` sessions of the database match the predicate."""
        query = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
            f" AND backend_type = 'client backend' AND {predicate}"
        )
        async with asyncio.timeout(20):
            while await self._value(query) != expected:
                await asyncio.sleep(0.02)


async def _until_idle(executor: Executor) -> None:
    async with asyncio.timeout(20):
        while not executor.idle:
            await asyncio.sleep(0.01)


async def _flushed(db: Database, executor: Executor, stats: Stats) -> int:
    """The commit counter once the executor is idle and the pool's backends published theirs."""
    await _until_idle(executor)
    # Draining makes the pool's backends exit, publishing what they counted.
    await db.pool.drain()
    await db.pool.wait()
    await stats.until_sessions("query NOT LIKE 'LISTEN%%'", POOL_SIZE)
    return await stats.commits()


@asynccontextmanager
async def _admin(
    pg_cluster: PgCluster,
) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    async with await psycopg.AsyncConnection.connect(pg_cluster.admin_url, autocommit=True) as conn:
        yield conn


async def _quiet_tables(database_url: str) -> None:
    # Autovacuum commits in the same database would be counted as ours.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            """
            DO $$
            DECLARE t record;
            BEGIN
                FOR t IN SELECT schemaname, tablename FROM pg_tables
                         WHERE schemaname NOT IN ('pg_catalog', 'information_schema') LOOP
                    EXECUTE format('ALTER TABLE %I.%I SET (autovacuum_enabled = false)',
                                   t.schemaname, t.tablename);
                END LOOP;
            END $$
            """
        )


async def test_a_sequential_one_task_invoke_commits_at_most_four_transactions(
    pg_cluster: PgCluster, database_url: str, settings: Settings, dev_identity: DevIdentity
) -> None:
    await _quiet_tables(database_url)
    db = Database(database_url, min_size=POOL_SIZE, max_size=POOL_SIZE)
    await db.open()
    services = Services(
        settings=settings,
        database=db,
        authenticator=Authenticator(settings.security, KeySet.from_settings(settings.security)),
        keyring=dev_identity.keyring(),
    )
    app = create_app()
    attach_services(app, services, HANDLERS)
    runtime = WorkflowRuntime(ExecutionSettings(), services.keyring)
    executor = Executor(db, runtime.handlers(), QUIET)
    configure_waiter(db, poll_interval_s=60.0)
    name = str(conninfo_to_dict(database_url)["dbname"])
    async with asgi_client(app) as http, _admin(pg_cluster) as admin:
        stats = Stats(admin, name)
        owner = client(http, dev_identity, OWNER)
        caller = client(http, dev_identity)
        tool = await publish_tool(owner)
        await executor.start()
        try:
            for n in range(3):  # warm-up: caches, LISTEN, prepared statements
                body = ok(await caller.call_tool("workflow_invoke", invoke_args(tool, {"n": n})))
                assert body["status"] == "completed"
            await _until_idle(executor)

            async def window(calls: int) -> int:
                before = await _flushed(db, executor, stats)
                for n in range(calls):
                    args = invoke_args(tool, {"n": 100 + n})
                    body = ok(await caller.call_tool("workflow_invoke", args))
                    assert body["status"] == "completed"
                return await _flushed(db, executor, stats) - before

            # Anything else that commits in the database (autovacuum visiting its catalogs
            # while the cluster holds hundreds of test databases) only ever adds to a window:
            # the least of a few windows of each kind is the one it did not touch.
            empty = min([await window(0) for _ in range(WINDOWS)])
            commits = min([await window(1) for _ in range(WINDOWS)]) - empty
        finally:
            await executor.stop()
            await close_waiter(db)
            await runtime.aclose()
            await db.close()
    assert 0 < commits <= MAX_COMMITS_PER_CALL, (commits, empty)
