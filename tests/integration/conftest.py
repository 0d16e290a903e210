"""Fixtures of the integration suite beside tests/conftest.py's: a fresh capacity estimator
and an app on a wide pool, for every domain folder (the Gateway's are in gateway/conftest.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.execution import close_waiter
from runtime.mcp.app import attach_services, create_app
from runtime.scheduler import capacity, door
from runtime.store import Database
from tests.conftest import RUNTIME_ROLE
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
