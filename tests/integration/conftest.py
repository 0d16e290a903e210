"""Fixtures for tests through the HTTP surface: the app on a fresh database, dev tokens."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from litestar import Litestar
from psycopg.rows import dict_row

from handlers import HANDLERS
from runtime.addresses import LOOPBACK_NETWORKS
from runtime.execution import close_waiter
from runtime.mcp.app import attach_services, create_app
from runtime.scheduler import capacity, door
from runtime.security import Authenticator, Keyring, KeySet
from runtime.security.devtools import DevIdentity
from runtime.security.keyring import new_keyring_document
from runtime.services import Services
from runtime.settings import Settings
from runtime.store import Database
from tests.conftest import RUNTIME_ROLE
from tests.support.binding_builders import publish_version, save_owner
from tests.support.mcp import LEGACY, MODERN, McpTestClient
from tests.support.publication_builders import context
from tests.support.published_workflow import two_calls_yaml
from tests.support.service_calls import sync_grants_outside_the_contract


@pytest.fixture(autouse=True)
def fresh_capacity_estimator() -> Iterator[None]:
    """Each test starts with no load measurements: the estimator is per process, and what an
    earlier test's executors measured (or a test's own simulated backlog) must not shed the
    calls of the next one."""
    capacity.reset()
    door.reset()
    yield
    capacity.reset()
    door.reset()


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


def asgi_client(app: Litestar) -> httpx.AsyncClient:
    """A client talking to the app over ASGI without leaving the event loop."""
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


@pytest.fixture
async def wide(services: Services, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """An app on a pool of many connections, so admissions really run in parallel."""
    database = Database(database_url, runtime_role=RUNTIME_ROLE, min_size=12, max_size=16)
    await database.open()
    app = create_app()
    attach_services(app, dataclasses.replace(services, database=database), HANDLERS)
    try:
        async with asgi_client(app) as http:
            yield http
    finally:
        await close_waiter(database)
        await database.close()


@pytest.fixture
def auth_headers(dev_identity: DevIdentity) -> dict[str, str]:
    """Valid user (workflow-admin) and Gateway tokens for the dev host."""
    return dev_identity.auth_headers(
        dev_identity.user_token(roles=("workflow-admin",)), dev_identity.app_token()
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
