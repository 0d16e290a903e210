"""Fixtures of the hostile-input suite: the same names as tests/integration/conftest.py.

The hostile tests talk to the service exactly as the integration tests do (the app on a fresh
database, POST /mcp over ASGI in the test's own event loop), so the fixtures are imported
from there rather than copied; tests/support/invocation adds the owner, caller and workers.
The app is the one exception: it is frozen as `serve` freezes it at start-up, because these
tests time /healthz while a hostile call runs, as a deployed service would answer it.
"""

from __future__ import annotations

import gc

import pytest
from litestar import Litestar

from handlers import HANDLERS
from runtime.mcp.app import attach_services, create_app
from runtime.services import Services
from tests.integration.conftest import (
    admin,
    asgi_client,
    auth_headers,
    dev_identity,
    http,
    keyring,
    legacy,
    mcp,
    modern,
    published,
    services,
    settings,
)
from tests.support.invocation import caller, owner, workers


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


__all__ = [
    "admin",
    "app",
    "asgi_client",
    "auth_headers",
    "caller",
    "dev_identity",
    "http",
    "keyring",
    "legacy",
    "mcp",
    "modern",
    "owner",
    "published",
    "services",
    "settings",
    "workers",
]
