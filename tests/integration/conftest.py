"""Fixtures of the integration suite beside tests/conftest.py's: an app on a wide pool, for
every domain folder (the Gateway's are in gateway/conftest.py). Each test's Services has an
admission of its own (runtime.admission.state), so no measurement of one test sheds the next."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.execution import close_waiter
from runtime.mcp.app import attach_services, create_app
from runtime.store import Database
from tests.conftest import RUNTIME_ROLE
from tests.support.mcp import asgi_client


@asynccontextmanager
async def app_on_pool(
    services: Services, database_url: str, min_size: int, max_size: int
) -> AsyncIterator[tuple[httpx.AsyncClient, Database]]:
    """An app (and its client) on a pool of its own, with that pool."""
    database = Database(
        database_url, runtime_role=RUNTIME_ROLE, min_size=min_size, max_size=max_size
    )
    await database.open()
    app = create_app()
    attach_services(app, dataclasses.replace(services, database=database), HANDLERS)
    try:
        async with asgi_client(app) as http:
            yield http, database
    finally:
        await close_waiter(database)
        await database.close()


@pytest.fixture
async def wide(services: Services, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """An app on a pool of many connections, so admissions really run in parallel."""
    async with app_on_pool(services, database_url, 12, 16) as (http, _):
        yield http
