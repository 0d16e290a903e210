"""Sign-in to the console with OpenID Connect (authorization code + PKCE), in a real browser."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar import Litestar

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.console import register_console
from runtime.mcp.app import attach_services, create_app
from runtime.security.devtools import DevIdentity
from runtime.settings import ConsoleSettings
from tests.support.console import serving
from tests.support.oidc_issuer import CLIENT_ID, IssuerState, issuer_app

pytestmark = pytest.mark.requirement("issue-39:console")

playwright_api = pytest.importorskip(
    "playwright.async_api", reason="Playwright for Python is not installed"
)
expect = playwright_api.expect
WAIT_MS = 20_000


@pytest.fixture
async def issuer(dev_identity: DevIdentity) -> AsyncIterator[IssuerState]:
    """The stand-in issuer, served on its own loopback port."""
    state = IssuerState(dev_identity)
    async with serving(issuer_app(state)) as url:
        state.url = url
        yield state


@pytest.fixture
def app(services: Services, issuer: IssuerState) -> Litestar:
    """The app with a console that signs people in with the issuer only (no development form)."""
    app = create_app()
    attach_services(app, services, HANDLERS)
    settings = ConsoleSettings(oidc_issuer=issuer.url, oidc_client_id=CLIENT_ID)
    register_console(app, dev_sign_in=False, settings=settings)
    return app


async def test_a_person_signs_in_with_the_issuer_by_code_and_pkce(
    browser: Any, console_url: str, issuer: IssuerState
) -> None:
    context = await browser.new_context(base_url=console_url)
    try:
        page = await context.new_page()
        await page.goto("/console/")
        await expect(page.get_by_label("Development user token")).to_have_count(0)
        await page.get_by_role("link", name="Sign in with your organisation's account").click()
        await expect(page).to_have_url(re.compile(r"/console/inbox$"), timeout=WAIT_MS)
        await expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
        await expect(page.locator("header")).to_contain_text("ann")
        assert issuer.challenge_methods == ["S256"] and issuer.exchanges == ["ok"]
        cookies = {cookie["name"]: cookie for cookie in await context.cookies()}
        session = cookies["wf_console"]
        assert session["httpOnly"] and session["sameSite"] == "Strict"
        assert "wf_console_oidc" not in cookies
    finally:
        await context.close()


async def test_a_callback_this_browser_did_not_start_signs_nobody_in(
    browser: Any, console_url: str, issuer: IssuerState
) -> None:
    context = await browser.new_context(base_url=console_url)
    try:
        page = await context.new_page()
        answer = await page.goto("/console/oidc/callback?code=stolen&state=forged")
        assert answer is not None and answer.status == 401
        await expect(page.get_by_role("alert")).to_contain_text("did not start here")
        assert issuer.exchanges == []
        await page.goto("/console/inbox")
        await expect(page).to_have_url(re.compile(r"/console/sign-in$"))
    finally:
        await context.close()
