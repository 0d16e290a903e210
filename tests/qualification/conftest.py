"""The qualification suite runs against real processes (see tests/support/server.py)."""

from __future__ import annotations

from tests.support.server import live_database, live_identity, live_server

__all__ = ["live_database", "live_identity", "live_server"]
