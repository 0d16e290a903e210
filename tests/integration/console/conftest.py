"""The console's tests run the app with the console registered (development sign-in on)."""

from __future__ import annotations

import pytest
from litestar import Litestar

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.console import register_console
from runtime.mcp.app import attach_services, create_app


@pytest.fixture
def app(services: Services) -> Litestar:
    """The ASGI app wired to the test services, with /console served."""
    app = create_app()
    attach_services(app, services, HANDLERS)
    register_console(app, dev_sign_in=True)
    return app
