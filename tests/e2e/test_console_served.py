"""`workflow-mcp serve` serves the console (issue 39); its development sign-in exists only where
the development identity is in use, not on a service with configured trusted keys."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from runtime.security.devtools import DEV_HOST_ID
from tests.support.gateway import run_gateway
from tests.support.server import LiveServer

pytestmark = pytest.mark.requirement("issue-39:console")


async def test_serve_serves_the_console_and_no_dev_sign_in_with_configured_keys(
    live_server: LiveServer,
) -> None:
    async with httpx.AsyncClient(base_url=live_server.base_url) as http:
        assert (await http.get("/console/")).headers["location"] == "/console/sign-in"
        form = await http.get("/console/sign-in")
        assert form.status_code == 200 and "No sign-in is configured" in form.text
        assert "Content-Security-Policy" in form.headers
        script = await http.get("/console/static/htmx.min.js")
        assert script.status_code == 200 and script.text.startswith("var htmx=")
        token = live_server.identity.user_token(roles=("workflow-admin",))
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        # No form to post, and a hand-made post with a valid token signs nobody in.
        assert csrf is None
        refused = await http.post("/console/sign-in", data={"token": token, "csrf": "x"})
        assert refused.status_code == 403 and "not enabled here" in refused.text
        assert "wf_console=" not in refused.headers.get("set-cookie", "")
        assert (await http.get("/console/inbox")).headers["location"] == "/console/sign-in"


async def test_the_gateway_process_relays_the_console(
    live_server: LiveServer, tmp_path: Path
) -> None:
    with run_gateway(
        tmp_path / "gateway",
        live_server.identity,
        live_server.mcp_url,
        tmp_path / "mcp-router.yml",
        host_id=DEV_HOST_ID,
    ) as gateway:
        base = gateway.mcp_url.removesuffix("/mcp")
        async with httpx.AsyncClient(base_url=base) as http:
            page = await http.get("/console/sign-in")
            script = await http.get("/console/static/console.css")
    assert page.status_code == 200 and "<h1>Sign in</h1>" in page.text
    assert "Content-Security-Policy" in page.headers
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/css")
