"""Test databases on real PostgreSQL: one cluster per session, one fresh database per test.

The session starts an embedded cluster in a temporary dir (fast mode: no fsync) or uses the
server at $DATABASE_URL, migrates a template database once from the current ``migrations/``
(dropped and recreated first, so new migration files are always picked up), and gives each
test its own ``CREATE DATABASE ... TEMPLATE`` copy, dropped afterwards.

Fixtures:
- ``pg_cluster`` (session): admin conninfo and helpers to create and drop databases.
- ``database_url`` (function): conninfo of a fresh migrated database, as the migration owner.
- ``db`` (function): an opened ``runtime.store.Database`` on it, as the runtime role.

Shared by the suites that talk to the service (tests/integration, tests/hostile): the app on the
test's database over ASGI in the test's own event loop (``dev_identity``, ``settings``,
``services``, ``app``, ``http``, ``auth_headers``, ``mcp``/``modern``/``legacy``, ``admin``,
``keyring``, ``published``) and the invocation roles (``owner``, ``caller``, ``workers``).
Shared by the suites that run the service as a process (e2e, fuzz, qualification, the
publisher's integration tests): ``live_identity``, ``live_database``, ``live_server``.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from litestar import Litestar
from psycopg.rows import dict_row

from handlers import HANDLERS
from runtime.addresses import LOOPBACK_NETWORKS
from runtime.collaborators import Services
from runtime.execution import close_waiter
from runtime.mcp.app import attach_services, create_app
from runtime.scheduler import Executor
from runtime.security import Authenticator, Keyring, KeySet
from runtime.security.devtools import DevIdentity
from runtime.security.keyring import new_keyring_document
from runtime.settings import Settings
from runtime.store import Database, EmbeddedPostgres, migrate
from runtime.store.admin import create_database, drop_database, with_database
from runtime.store.migrations import DEFAULT_DIRECTORY
from tests.support import hang_report
from tests.support.binding_builders import (
    OWNER,
    publish_version,
    save_owner,
)
from tests.support.invocation import client, running_executor
from tests.support.log_scan import LOGGERS, SCAN, LogScan
from tests.support.mcp import LEGACY, MODERN, McpTestClient, asgi_client
from tests.support.publication_builders import context
from tests.support.published_workflow import two_calls_yaml
from tests.support.server import LiveServer, run_server, template_copy
from tests.support.service_calls import sync_grants_outside_the_contract
from tests.support.tokens import auth_headers as token_headers

RUNTIME_ROLE = "workflow_runtime"


def pytest_configure(config: pytest.Config) -> None:
    """Name every skip in the summary: a clone without ../shared skips its cross-checks."""
    chars = config.option.reportchars
    if not any(flag in chars for flag in "saA"):
        config.option.reportchars = chars + "s"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Report the pending asyncio tasks 10 s before pytest-timeout would fail the test."""
    marker = item.get_closest_marker("timeout")
    configured = marker.args[0] if marker and marker.args else item.config.getini("timeout")
    timeout = float(configured or 0)
    timer = hang_report.arm(item.nodeid, max(1.0, timeout - 10)) if timeout > 0 else None
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


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
    pool = Database(database_url, runtime_role=RUNTIME_ROLE, min_size=1, max_size=4)
    async with pool as database:
        yield database


@pytest.fixture(scope="session")
def live_identity(tmp_path_factory: pytest.TempPathFactory) -> DevIdentity:
    """The development identity the live server trusts."""
    return DevIdentity(tmp_path_factory.mktemp("live-identity"))


@pytest.fixture(scope="session")
async def live_database(pg_cluster: PgCluster, migrated_template: str) -> AsyncIterator[str]:
    """A migrated database for the live server, dropped after the session."""
    async with template_copy(pg_cluster, migrated_template, "live") as url:
        yield url


@pytest.fixture(scope="session")
def live_server(
    live_database: str, live_identity: DevIdentity, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The service running in a subprocess on the session's live database."""
    with run_server(live_database, tmp_path_factory.mktemp("live-server"), live_identity) as server:
        yield server


@pytest.fixture(scope="session")
def dev_identity(tmp_path_factory: pytest.TempPathFactory) -> DevIdentity:
    """A development key pair, JWKS and keyring shared by the session."""
    return DevIdentity(Path(tmp_path_factory.mktemp("dev-identity")))


@pytest.fixture
def settings(dev_identity: DevIdentity) -> Settings:
    """Service settings trusting the dev identity; small pages to exercise cursors."""
    settings = Settings()
    settings.security = dev_identity.settings()
    settings.server.tools_list_page_size = 2
    # Local backends of the tests listen on loopback (tests/hostile shows the default refusal).
    settings.publication.destinations.allowed_networks = list(LOOPBACK_NETWORKS)
    return settings


@pytest.fixture
def services(settings: Settings, db: Database, dev_identity: DevIdentity) -> Services:
    """Services on the test's own database."""
    keyset = KeySet.from_settings(settings.security)
    return Services(
        settings=settings,
        database=db,
        authenticator=Authenticator(settings.security, keyset),
        keyring=dev_identity.keyring(),
    )


@pytest.fixture
def app(services: Services) -> Litestar:
    """The ASGI app wired to the test services (the test owns the database)."""
    app = create_app()
    attach_services(app, services, HANDLERS)
    return app


@pytest.fixture
async def http(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the app, in the test's own event loop (the pool lives there)."""
    async with asgi_client(app) as client:
        yield client


@pytest.fixture
def auth_headers(dev_identity: DevIdentity) -> dict[str, str]:
    """Valid user (workflow-admin) and Gateway tokens for the dev host."""
    return token_headers(
        dev_identity, dev_identity.user_token(roles=("workflow-admin",)), dev_identity.app_token()
    )


@pytest.fixture(params=[MODERN, LEGACY])
def mcp(
    request: pytest.FixtureRequest, http: httpx.AsyncClient, auth_headers: dict[str, str]
) -> McpTestClient:
    """An MCP client in each protocol era."""
    return McpTestClient(http, request.param, auth_headers)


@pytest.fixture
def modern(http: httpx.AsyncClient, auth_headers: dict[str, str]) -> McpTestClient:
    """An MCP client speaking 2026-07-28."""
    return McpTestClient(http, MODERN, auth_headers)


@pytest.fixture
def legacy(http: httpx.AsyncClient, auth_headers: dict[str, str]) -> McpTestClient:
    """An MCP client speaking 2025-11-25."""
    return McpTestClient(http, LEGACY, auth_headers)


@pytest.fixture
async def admin(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """An autocommit connection as the schema owner."""
    conn = await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    )
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def keyring(db: Database) -> AsyncIterator[Keyring]:
    """A fresh keyring; also closes the test database's result waiter afterwards."""
    yield Keyring.from_document(new_keyring_document("k1"))
    await close_waiter(db)


@pytest.fixture
async def published(db: Database) -> AsyncIterator[str]:
    """A published two-call definition whose grant covers accounts.lookup."""
    wf_def_id = str(uuid.uuid4())
    await save_owner(db, wf_def_id)
    await publish_version(db, wf_def_id, text=two_calls_yaml())
    await sync_grants_outside_the_contract(db, context(), wf_def_id, "g-1", "accounts.lookup")
    yield wf_def_id
    await close_waiter(db)


@pytest.fixture
def owner(http: httpx.AsyncClient, dev_identity: DevIdentity) -> McpTestClient:
    """The definition owner (publishes and approves Tools)."""
    return client(http, dev_identity, OWNER)


@pytest.fixture
async def caller(
    http: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> AsyncIterator[McpTestClient]:
    """A Tool user; the test's result waiter is closed afterwards."""
    yield client(http, dev_identity)
    await close_waiter(services.database)


@pytest.fixture
async def workers(services: Services) -> AsyncIterator[Executor]:
    """An executor running for the whole test."""
    async with running_executor(services) as executor:
        yield executor


# Every log line of the session, scanned for tokens and input values at its end.
@pytest.fixture(scope="session", autouse=True)
def log_scan() -> Iterator[LogScan]:
    """The session's log lines; fails the session's last test if any line leaks a secret."""
    root = logging.getLogger()
    previous = {name: logging.getLogger(name).level for name in LOGGERS}
    root.addHandler(SCAN)
    for name in LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    try:
        yield SCAN
    finally:
        root.removeHandler(SCAN)
        for name, level in previous.items():
            logging.getLogger(name).setLevel(level)
    leaked = SCAN.leaks()
    assert not leaked, f"{len(leaked)} log line(s) hold a token or input value: {leaked[:3]}"
