"""Sign-in and sign-out (development mode: a development user token), the console's static files."""

from __future__ import annotations

import time
from typing import Any

from litestar import Response, get, post
from litestar.datastructures import Cookie, State

from runtime.collaborators import Services
from runtime.console.common import SIGN_IN, AnyRequest, acted
from runtime.console.guard import CONSOLE_SERVICE, Caller, same_origin, scheme_of, signed_in
from runtime.console.render import SECURITY_HEADERS, STATIC, page, redirect
from runtime.console.revocations import revoke_session
from runtime.console.session import (
    COOKIE,
    PRE_COOKIE,
    csrf_ok,
    csrf_token,
    new_nonce,
    seal_session,
)
from runtime.errors import AuthenticationError, WorkflowError

PATH = "/console"
MAX_TOKEN_CHARS = 16_384
STATIC_FILES = {
    "console.css": "text/css; charset=utf-8",
    "htmx.min.js": "text/javascript; charset=utf-8",
}


def secure(request: AnyRequest) -> bool:
    """Cookies are Secure whenever the console is reached over TLS."""
    return scheme_of(request) == "https"


def session_cookie(request: AnyRequest, key: str, value: str, max_age: int) -> Cookie:
    """An HttpOnly, SameSite=Strict console cookie (Secure over TLS)."""
    return Cookie(
        key=key,
        value=value,
        max_age=max_age,
        path=PATH,
        httponly=True,
        samesite="strict",
        secure=secure(request),
    )


def sign_in_page(
    request: AnyRequest, state: State, status: int = 200, error: str | None = None
) -> Response[bytes]:
    """The sign-in page (with error), and a fresh nonce for its form's CSRF token."""
    services: Services = state.services
    nonce = new_nonce()
    response = page(
        "sign_in.html",
        status,
        dev_sign_in=bool(state.get("console_dev_sign_in")),
        oidc=state.get("console_oidc") is not None,
        sign_in_csrf=csrf_token(services.keyring, nonce),
        error=error,
    )
    response.set_cookie(session_cookie(request, PRE_COOKIE, nonce, 1800))
    return response


@get("/")
async def console_home(request: AnyRequest, state: State) -> Response[bytes]:
    """The console's entry: the inbox when signed in, else sign-in."""
    return redirect("/console/inbox" if await signed_in(request, state) else SIGN_IN)


@get("/sign-in")
async def sign_in_form(request: AnyRequest, state: State) -> Response[bytes]:
    """The sign-in form (development mode: a development user token)."""
    return sign_in_page(request, state)


@post("/sign-in")
async def sign_in(request: AnyRequest, state: State) -> Response[bytes]:
    """Verify the token as MCP would, and keep it only in a sealed HttpOnly cookie."""
    services: Services = state.services
    form = await request.form()
    sent_csrf = form.get("csrf")
    if not state.get("console_dev_sign_in"):
        return sign_in_page(request, state, 403, "Development sign-in is not enabled here.")
    if not same_origin(request) or not csrf_ok(
        services.keyring, request.cookies.get(PRE_COOKIE), sent_csrf
    ):
        return sign_in_page(request, state, 403, "The sign-in form expired: please try again.")
    token = form.get("token")
    token = token.strip() if isinstance(token, str) else ""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return sign_in_page(request, state, 422, "Paste a development user token.")
    try:
        context = services.authenticator.authenticate_user(token, CONSOLE_SERVICE)
    except (AuthenticationError, WorkflowError) as failure:
        # The verifier's messages name the failed check, never the token.
        return sign_in_page(request, state, 401, f"That token was refused: {failure.message}")
    expires = int(context.user_token_expires_at.timestamp())
    value = seal_session(services.keyring, token, expires)
    max_age = max(1, expires - int(time.time()))
    response = redirect("/console/inbox")
    response.set_cookie(session_cookie(request, COOKIE, value, max_age))
    response.delete_cookie(PRE_COOKIE, path=PATH)
    return response


def signed_out() -> Response[bytes]:
    """To the sign-in page, the session cookie cleared."""
    response = redirect(SIGN_IN)
    response.delete_cookie(COOKIE, path=PATH)
    return response


@post("/sign-out")
async def sign_out(request: AnyRequest, state: State) -> Response[bytes]:
    """End the session: revoked for every replica (a copied cookie too), the cookie cleared."""
    services: Services = state.services
    if await signed_in(request, state) is None:
        # Already ended (signed out in another tab, expired): nothing to revoke, and a
        # forged post can only clear a cookie that opens nothing.
        return signed_out()

    async def act(caller: Caller, form: dict[str, Any]) -> Response[bytes]:
        await revoke_session(services.database, caller.host_id, caller.session)
        return signed_out()

    return await acted(request, state, act)


@get("/static/{name:str}")
async def static_file(name: str) -> Response[bytes]:
    """One of the console's own static files (a fixed list; nothing else is served)."""
    media_type = STATIC_FILES.get(name)
    if media_type is None:
        return Response(b"not found", status_code=404, media_type="text/plain")
    headers = {**SECURITY_HEADERS, "Cache-Control": "public, max-age=3600"}
    return Response((STATIC / name).read_bytes(), media_type=media_type, headers=headers)
