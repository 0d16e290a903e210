"""The console through the reference Gateway (issue 39): /console relayed to Workflow as it is."""

from __future__ import annotations

import httpx
import pytest
from litestar import Litestar

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.console import register_console
from runtime.mcp.app import attach_services, create_app
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST
from tests.support.console import csrf_of

pytestmark = pytest.mark.requirement("issue-39:console")

ORIGIN = "http://gateway.test"


@pytest.fixture
def app(services: Services) -> Litestar:
    """The test's Workflow app with its console served."""
    app = create_app()
    attach_services(app, services, HANDLERS)
    register_console(app, dev_sign_in=True)
    return app


async def test_a_person_signs_in_to_the_console_through_the_gateway(
    gateway_http: httpx.AsyncClient, dev_identity: DevIdentity
) -> None:
    form = await gateway_http.get("/console/sign-in")
    assert form.status_code == 200 and "Content-Security-Policy" in form.headers
    token = dev_identity.user_token(host_id=HOST, user_id="ann", roles=("approver",))
    # The browser's origin is the Gateway's: the relay keeps its Host, so the console agrees.
    signed_in = await gateway_http.post(
        "/console/sign-in",
        data={"csrf": csrf_of(form.text), "token": token},
        headers={"Origin": ORIGIN},
    )
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/console/inbox"
    assert "HttpOnly" in signed_in.headers["set-cookie"]
    inbox = await gateway_http.get("/console/inbox")
    assert inbox.status_code == 200 and "No open tasks are assigned to you." in inbox.text
    assert token not in inbox.text
    # Another origin is still refused by the console behind the relay.
    cross = await gateway_http.post(
        "/console/sign-out",
        data={"csrf": csrf_of(inbox.text)},
        headers={"Origin": "https://x.example"},
    )
    assert cross.status_code == 403
