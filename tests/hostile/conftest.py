"""Fixtures of the hostile-input suite: the same names as tests/integration/conftest.py.

The hostile tests talk to the service exactly as the integration tests do (the app on a fresh
database, POST /mcp over ASGI in the test's own event loop), so the fixtures are imported
from there rather than copied; tests/support/invocation adds the owner, caller and workers.
"""

from __future__ import annotations

from tests.integration.conftest import (
    admin,
    app,
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
