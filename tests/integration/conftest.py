"""Fixtures for tests through the HTTP surface: the app on a fresh database, dev tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from litestar import Litestar

from runtime.mcp.app import attach_services, create_app
from runtime.security import Authenticator, KeySet
from runtime.security.devtools import DevIdentity
from runtime.services import Services
from runtime.settings import Settings
from runtime.store import Database
from tests.support.mcp import LEGACY, MODERN, McpTestClient


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
    attach_services(app, services)
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
