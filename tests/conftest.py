"""Test databases on real PostgreSQL: one cluster per session, one fresh database per test.

The session starts an embedded cluster in a temporary dir (fast mode: no fsync) or uses the
server at $DATABASE_URL, migrates a template database once from the current ``migrations/``
(dropped and recreated first, so new migration files are always picked up), and gives each
test its own ``CREATE DATABASE ... TEMPLATE`` copy, dropped afterwards.

Fixtures:
- ``pg_cluster`` (session): admin conninfo and helpers to create and drop databases.
- ``database_url`` (function): conninfo of a fresh migrated database, as the migration owner.
- ``db`` (function): an opened ``runtime.store.Database`` on it, as the runtime role.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runtime.store import Database, EmbeddedPostgres, migrate
from runtime.store.admin import create_database, drop_database, with_database
from runtime.store.migrations import DEFAULT_DIRECTORY

RUNTIME_ROLE = "workflow_runtime"
# Every log line of the session, scanned for tokens and input values at its end.
pytest_plugins = ["tests.support.log_scan"]


def pytest_configure(config: pytest.Config) -> None:
    """Name every skip in the summary: a clone without ../shared skips its cross-checks."""
    chars = config.option.reportchars
    if not any(flag in chars for flag in "saA"):
        config.option.reportchars = chars + "s"


@dataclass
class PgCluster:
    """The session's PostgreSQL server and helpers to make databases on it."""

    admin_url: str
    embedded: EmbeddedPostgres | None = None
    template: str | None = None
    prefix: str = field(default_factory=lambda: f"wf_{os.getpid()}")
    _counter: Iterator[int] = field(default_factory=itertools.count)

    def new_name(self, kind: str = "test") -> str:
        """A database name unique to this session (sessions may share one server)."""
        return f"{self.prefix}_{kind}_{next(self._counter)}"

    def url_for(self, name: str) -> str:
        """Conninfo of database name on this server, as the admin login."""
        return with_database(self.admin_url, name)

    async def create_database(self, name: str | None = None, *, template: str | None = None) -> str:
        """Create a database (empty, or a copy of template) and return its conninfo."""
        return await create_database(
            self.admin_url, name or self.new_name(), template=template, file_copy=True
        )

    async def drop_database(self, name: str) -> None:
        """Drop database name, disconnecting whoever is still on it."""
        await drop_database(self.admin_url, name)


def _start_embedded() -> tuple[EmbeddedPostgres, Path]:
    base = Path(tempfile.mkdtemp(prefix="wf-pytest-"))
    # mkdtemp makes 0700 dirs; when we are root the server account must traverse this one.
    base.chmod(0o755)
    cluster = EmbeddedPostgres(base / "pg", database="postgres", fast=True)
    try:
        cluster.start()
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    return cluster, base


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """The session's server: $DATABASE_URL, or an embedded cluster stopped at session end."""
    external = os.environ.get("DATABASE_URL")
    if external:
        yield PgCluster(admin_url=external)
        return
    cluster, base = _start_embedded()

    def shut_down() -> None:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(base, ignore_errors=True)

    # Covers exits where fixture teardown never runs (e.g. a KeyboardInterrupt during setup).
    atexit.register(shut_down)
    try:
        yield PgCluster(admin_url=cluster.admin_url(), embedded=cluster)
    finally:
        atexit.unregister(shut_down)
        shut_down()


@pytest.fixture(scope="session")
async def migrated_template(pg_cluster: PgCluster) -> AsyncIterator[str]:
    """Name of the template database, migrated once per session from migrations/."""
    name = f"{pg_cluster.prefix}_template"
    await pg_cluster.drop_database(name)
    url = await pg_cluster.create_database(name)
    try:
        await migrate(url, DEFAULT_DIRECTORY)
        pg_cluster.template = name
        yield name
    finally:
        await pg_cluster.drop_database(name)


@pytest.fixture
async def database_url(pg_cluster: PgCluster, migrated_template: str) -> AsyncIterator[str]:
    """Conninfo of a fresh copy of the migrated template, dropped after the test."""
    name = pg_cluster.new_name()
    url = await pg_cluster.create_database(name, template=migrated_template)
    try:
        yield url
    finally:
        await pg_cluster.drop_database(name)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    """An opened Database on the test's fresh database, connected as the runtime role."""
    database = Database(database_url, runtime_role=RUNTIME_ROLE, min_size=1, max_size=4)
    await database.open()
    try:
        yield database
    finally:
        await database.close()
