"""Fixtures of the hostile-input suite: the integration suite's, with a frozen app.

The hostile tests talk to the service exactly as the integration tests do (the app on a fresh
database, POST /mcp over ASGI in the test's own event loop), with the fixtures both share in
tests/conftest.py, plus the outbound ``backend``. The app is the one exception: it is frozen as
`serve` freezes it at start-up, because these tests time /healthz while a hostile call runs, as
a deployed service would answer it.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator

import pytest
from litestar import Litestar

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.mcp.app import attach_services, create_app
from tests.support.execution import serving
from tests.support.outbound import OutboundBackend, gzip_bomb


@pytest.fixture
def app(services: Services) -> Litestar:
    """The ASGI app wired to the test services, its start-up heap frozen as serve's lifespan does.

    Without the freeze a full collection of the whole test process (pytest, every imported test
    module) holds the loop and /healthz with it, which no serving process does.
    """
    app = create_app()
    attach_services(app, services, HANDLERS)
    gc.freeze()
    return app


@pytest.fixture
async def backend() -> AsyncIterator[OutboundBackend]:
    """The outbound backend, serving on a free loopback port for the test."""
    gzip_bomb()  # built before any run: building it on the shared loop would stall leases
    async with serving(OutboundBackend()) as running:  # type: ignore[arg-type]
        yield running  # type: ignore[misc]
