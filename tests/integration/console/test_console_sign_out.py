"""Console sign-out over HTTP: the session is revoked on the server, not only cleared in the
browser, so a copied cookie replayed afterwards is refused by every replica, like any cookie the
console never issued; another session (another user's, or the same user's elsewhere) goes on."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import psycopg
import pytest
from litestar import Litestar

from handlers import HANDLERS
from runtime.collaborators import Services
from runtime.console import register_console
from runtime.console.session import COOKIE, seal_session
from runtime.mcp.app import attach_services, create_app
from runtime.security import Authenticator, KeySet
from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.binding_builders import HOST
from tests.support.console import ConsoleClient, console_client, hidden_fields

pytestmark = pytest.mark.requirement("issue-39:console")
SIGN_OUT = "/console/sign-out"
TASK = f"/console/tasks/{uuid.uuid4()}"


def _token(identity: DevIdentity, user_id: str) -> str:
    return identity.user_token(
        host_id=HOST, user_id=user_id, roles=("approver",), client_id="portal"
    )


async def _signed_in(app: Litestar, identity: DevIdentity, user_id: str) -> ConsoleClient:
    person = ConsoleClient(console_client(app))
    answer = await person.sign_in(_token(identity, user_id))
    assert answer.status_code == 303 and answer.headers["location"] == "/console/inbox"
    return person


def _cookie(person: ConsoleClient) -> str:
    value = person.http.cookies.get(COOKIE, path="/console")
    assert value, "no session cookie"
    return value


def _carrying(cookie: str) -> dict[str, str]:
    """The headers of a request sending only this session cookie (a copy of it)."""
    return {"Cookie": f"{COOKIE}={cookie}"}


async def _sign_out(person: ConsoleClient) -> tuple[httpx.Response, dict[str, str]]:
    """Press the pages' sign-out button; the answer and the form that was posted."""
    page = (await person.get("/console/inbox")).text
    form = hidden_fields(page, SIGN_OUT)
    return await person.http.post(SIGN_OUT, data=form), form


async def _answers(app: Litestar, cookie: str, form: dict[str, str]) -> list[tuple[Any, ...]]:
    """What a client holding only this cookie is answered: a page, and a form post."""
    async with console_client(app) as thief:
        page = await thief.get("/console/inbox", headers=_carrying(cookie))
        post = await thief.post(TASK, data={"value": "APPROVED", **form}, headers=_carrying(cookie))
    return [
        (page.status_code, page.headers.get("location")),
        (post.status_code, "nothing was changed" in post.text),
    ]


async def test_a_cookie_replayed_after_sign_out_is_refused_like_one_never_issued(
    app: Litestar, dev_identity: DevIdentity, services: Services
) -> None:
    ann = await _signed_in(app, dev_identity, "ann")
    copied = _cookie(ann)
    signed_out, form = await _sign_out(ann)
    assert (signed_out.status_code, signed_out.headers["location"]) == (303, "/console/sign-in")
    never_issued = await _answers(app, "not-a-session", form)
    assert never_issued == [(303, "/console/sign-in"), (403, True)]
    assert await _answers(app, copied, form) == never_issued
    # A session that expired on its own is refused the same way.
    expired = seal_session(services.keyring, _token(dev_identity, "ann"), int(time.time()) - 1)
    assert await _answers(app, expired, form) == never_issued


async def test_a_signed_out_session_is_refused_by_another_replica_and_is_stored_only_as_a_digest(
    app: Litestar,
    dev_identity: DevIdentity,
    services: Services,
    database_url: str,
    admin: psycopg.AsyncConnection[Any],
) -> None:
    ann = await _signed_in(app, dev_identity, "ann")
    copied = _cookie(ann)
    _, form = await _sign_out(ann)
    # Another replica (or this one restarted): its own pool, nothing shared in memory.
    settings = services.settings
    async with Database(database_url, min_size=1, max_size=2) as database:
        replica = Services(
            settings=settings,
            database=database,
            authenticator=Authenticator(settings.security, KeySet.from_settings(settings.security)),
            keyring=dev_identity.keyring(),
        )
        other = create_app()
        attach_services(other, replica, HANDLERS)
        register_console(other, dev_sign_in=True)
        assert await _answers(other, copied, form) == [(303, "/console/sign-in"), (403, True)]
    rows = await (
        await admin.execute("SELECT t::text AS row FROM workflow_console_session_revocation t")
    ).fetchall()
    assert len(rows) == 1 and str(rows[0]["row"]).startswith(f"({HOST},sha256:")
    assert copied not in rows[0]["row"]


async def test_a_second_sign_out_is_harmless_and_other_sessions_go_on(
    app: Litestar, dev_identity: DevIdentity
) -> None:
    ann = await _signed_in(app, dev_identity, "ann")
    ann_elsewhere = await _signed_in(app, dev_identity, "ann")
    bob = await _signed_in(app, dev_identity, "bob")
    copied = _cookie(ann)
    _, form = await _sign_out(ann)
    # The same form again with the copied cookie (a second tab, a double click): to sign-in.
    async with console_client(app) as again:
        for _ in range(2):
            answer = await again.post(SIGN_OUT, data=form, headers=_carrying(copied))
            assert (answer.status_code, answer.headers["location"]) == (303, "/console/sign-in")
    # ...and the session stays revoked.
    assert await _answers(app, copied, form) == [(303, "/console/sign-in"), (403, True)]
    assert (await ann.get("/console/inbox")).headers["location"] == "/console/sign-in"
    for person in (ann_elsewhere, bob):
        page = await person.get("/console/inbox")
        assert page.status_code == 200 and "Sign out" in page.text
