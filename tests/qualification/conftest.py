"""The qualification suite runs against real processes (see tests/support/server.py).

``live_server`` is the plain service; ``qual_stack`` is the service configured to reach the
suite's local backends and token-exchange endpoint (tests/support/live_stack.py), with
``owner``/``caller`` MCP clients of it over HTTP.
"""

from __future__ import annotations

from tests.support.live_stack import caller, live_http, owner, qual_database, qual_stack
from tests.support.server import live_database, live_identity, live_server

__all__ = [
    "caller",
    "live_database",
    "live_http",
    "live_identity",
    "live_server",
    "owner",
    "qual_database",
    "qual_stack",
]
