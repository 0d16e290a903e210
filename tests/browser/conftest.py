"""Browser tests of the console: headless Debian chromium driven by Playwright for Python.

The service runs in the test's own event loop (uvicorn on a free loopback port), on the test's
database and services, so the test can set up runs and Tools through MCP beside the browser.
Skipped, saying why, where chromium or Playwright is not installed (`.ci/run` installs both).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar import Litestar

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.console import register_console
from runtime.mcp.app import attach_services, create_app
from tests.support.console import serving

CHROMIUM = Path("/usr/bin/chromium")
# The machine's network is closed, and nothing of the browser's own should run beside the test.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

try:
    from playwright.async_api import Browser, async_playwright
except ImportError:  # pragma: no cover - depends on the machine
    async_playwright = None  # type: ignore[assignment]


def _skip_reason() -> str | None:
    if async_playwright is None:
        return "Playwright for Python is not installed (pip install playwright; .ci/run does)"
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        return "Debian's chromium is not installed (apt-get install chromium; .ci/run does)"
    return None


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    """One headless chromium for the session's browser tests."""
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    executable = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
def app(services: Services) -> Litestar:
    """The ASGI app on the test services, with /console served (development sign-in on)."""
    app = create_app()
    attach_services(app, services, HANDLERS)
    register_console(app, dev_sign_in=True)
    return app


@pytest.fixture
async def console_url(app: Litestar) -> AsyncIterator[str]:
    """The app served over real HTTP on a free loopback port, in the test's event loop."""
    async with serving(app) as url:
        yield url


def axe_source() -> str:
    """axe-core (MPL-2.0, vendored unmodified from npm axe-core 4.14.1)."""
    return (Path(__file__).with_name("vendor") / "axe.min.js").read_text("utf-8")


async def serious_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page as it stands."""
    await page.add_script_tag(content=axe_source())
    result = await page.evaluate("async () => await axe.run(document)")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]
