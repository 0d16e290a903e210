"""Sign-in with OpenID Connect: the routes that start the flow and take the issuer's answer."""

from __future__ import annotations

import time

from litestar import Response, get
from litestar.datastructures import Cookie, State
from litestar.params import Parameter

from runtime.collaborators import Services
from runtime.console.common import SIGN_IN, AnyRequest
from runtime.console.guard import CONSOLE_SERVICE, scheme_of
from runtime.console.oidc import FLOW_COOKIE, FLOW_SECONDS, OidcClient, OidcError
from runtime.console.render import page, redirect
from runtime.console.session import COOKIE, seal_session
from runtime.console.signin import PATH, secure, session_cookie, sign_in_page
from runtime.errors import AuthenticationError, WorkflowError


def _origin(request: AnyRequest) -> str:
    return f"{scheme_of(request)}://{request.url.netloc}"


@get("/oidc/start")
async def oidc_start(request: AnyRequest, state: State) -> Response[bytes]:
    """Send the browser to the issuer (authorization code flow with PKCE)."""
    services: Services = state.services
    oidc: OidcClient | None = state.get("console_oidc")
    if oidc is None:
        return redirect(SIGN_IN)
    try:
        started = await oidc.start(services.keyring, _origin(request))
    except OidcError as failure:
        return sign_in_page(request, state, 502, str(failure))
    response = redirect(started.location)
    # Lax, not Strict: the issuer's redirect back to the callback is a cross-site navigation.
    response.set_cookie(
        Cookie(
            key=FLOW_COOKIE,
            value=started.flow_cookie,
            max_age=FLOW_SECONDS,
            path=f"{PATH}/oidc",
            httponly=True,
            samesite="lax",
            secure=secure(request),
        )
    )
    return response


@get("/oidc/callback")
async def oidc_callback(
    request: AnyRequest,
    state: State,
    code: str | None = None,
    oidc_state: str | None = Parameter(query="state", default=None),
    error: str | None = None,
) -> Response[bytes]:
    """The issuer's answer: exchange the code, verify the token as MCP would, start a session."""
    services: Services = state.services
    oidc: OidcClient | None = state.get("console_oidc")
    if oidc is None:
        return redirect(SIGN_IN)
    if error is not None:
        return sign_in_page(request, state, 401, "The sign-in service did not sign you in.")
    try:
        token = await oidc.finish(
            services.keyring, request.cookies.get(FLOW_COOKIE), oidc_state, code
        )
        context = services.authenticator.authenticate_user(token, CONSOLE_SERVICE)
    except OidcError as failure:
        return sign_in_page(request, state, 401, str(failure))
    except (AuthenticationError, WorkflowError) as failure:
        return sign_in_page(request, state, 401, f"Your token was refused: {failure.message}")
    expires = int(context.user_token_expires_at.timestamp())
    # A page, not a redirect: the navigation to the inbox must start on this site for the
    # browser to send the SameSite=Strict session cookie with it.
    response = page("signed_in.html")
    response.set_cookie(
        session_cookie(
            request,
            COOKIE,
            seal_session(services.keyring, token, expires),
            max(1, expires - int(time.time())),
        )
    )
    response.delete_cookie(FLOW_COOKIE, path=f"{PATH}/oidc")
    return response
