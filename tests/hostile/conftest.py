"""Fixtures of the hostile-input suite: the app, database and identities of tests/integration."""

from __future__ import annotations

from tests.integration.conftest import (
    admin,
    app,
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

__all__ = [
    "admin",
    "app",
    "auth_headers",
    "dev_identity",
    "http",
    "keyring",
    "legacy",
    "mcp",
    "modern",
    "published",
    "services",
    "settings",
]
