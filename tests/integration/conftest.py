"""Fixtures of the integration suite beside tests/conftest.py's: a fresh capacity estimator,
an app on a wide pool, and the Gateway in front of the test's Workflow app."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from litestar import Litestar

from gateway.app import Gateway, build_gateway, create_gateway_app
from handlers import HANDLERS
from runtime.execution import close_waiter
from runtime.mcp.app import attach_services, create_app
from runtime.scheduler import capacity, door
from runtime.security.devtools import DevIdentity
from runtime.services import Services
from runtime.settings import Settings
from runtime.store import Database
from tests.conftest import RUNTIME_ROLE
from tests.support.gateway import RecordingTransport, gateway_settings
from tests.support.mcp import asgi_client


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
def router_file(tmp_path: Path) -> Path:
    """Where this test's snapshot lives (absent until a test writes it)."""
    return tmp_path / "mcp-router.yml"


@pytest.fixture
def workflow_seen(app: Litestar) -> RecordingTransport:
    """The Gateway's way to the in-process Workflow app, recording every request."""
    return RecordingTransport(httpx.ASGITransport(app=app))


@pytest.fixture
async def gateway(
    settings: Settings,
    router_file: Path,
    dev_identity: DevIdentity,
    workflow_seen: RecordingTransport,
) -> AsyncIterator[Gateway]:
    """A Gateway minting its app bearer from the dev identity, in front of the test Workflow."""
    wired = build_gateway(
        gateway_settings(settings, router_file), identity=dev_identity, transport=workflow_seen
    )
    yield wired
    await wired.client.aclose()


@pytest.fixture
async def gateway_http(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the Gateway's ASGI app, in the test's event loop."""
    transport = httpx.ASGITransport(app=create_gateway_app(gateway))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway.test") as client:
        yield client
