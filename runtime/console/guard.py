"""Who is signed in to the console, and whether a form really came from one of its pages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from litestar import Request
from litestar.datastructures import State

from runtime.collaborators import Services
from runtime.console.calls import Calls
from runtime.console.revocations import is_revoked
from runtime.console.session import COOKIE, Session, csrf_ok, csrf_token, open_session
from runtime.errors import AuthenticationError, WorkflowError
from runtime.mcp.dispatch import ToolDispatcher
from runtime.security import InvocationContext

# The caller service id of calls made from the console: Workflow's own first-party pages.
CONSOLE_SERVICE = "workflow-console"


@dataclass(frozen=True)
class Caller:
    """A signed-in person: their verified context, their forms' CSRF token, and their calls."""

    context: InvocationContext
    session: Session
    csrf: str
    calls: Calls

    @property
    def user_id(self) -> str:
        """The user id the pages greet."""
        return self.context.user_id

    @property
    def host_id(self) -> str:
        """The verified host every call is scoped to."""
        return self.context.host_id


async def signed_in(request: Request[Any, Any, Any], state: State) -> Caller | None:
    """The caller of the session cookie whose bearer still verifies and who never signed it
    out, else None: an expired or signed-out session is refused like a cookie never issued."""
    services: Services = state.services
    session = open_session(services.keyring, request.cookies.get(COOKIE))
    if session is None:
        return None
    try:
        context = services.authenticator.authenticate_user(session.token.reveal(), CONSOLE_SERVICE)
    except (AuthenticationError, WorkflowError):
        return None
    if await is_revoked(services.database, context.host_id, session):
        return None
    dispatcher: ToolDispatcher = state.dispatcher
    token = csrf_token(services.keyring, session.nonce)
    return Caller(context, session, token, Calls(dispatcher, context))


def same_origin(request: Request[Any, Any, Any]) -> bool:
    """False when the browser says the request came from another site or origin.

    Browsers send Origin on every POST (and Sec-Fetch-Site): a cross-site form post is refused
    here even before its CSRF token is checked. A client that sends neither is judged by the
    token alone.
    """
    headers = request.headers
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    if origin == "null":
        return False
    ours = urlsplit(str(request.base_url))
    theirs = urlsplit(origin)
    return (theirs.scheme, theirs.netloc) == (scheme_of(request), ours.netloc)


def scheme_of(request: Request[Any, Any, Any]) -> str:
    """The scheme the browser used: X-Forwarded-Proto from a relay (the Gateway's), else ours.

    A page can set no such header on a cross-site request; it only makes cookies Secure and the
    origin check stricter, so a client sending it gains nothing.
    """
    forwarded = request.headers.get("x-forwarded-proto")
    if forwarded in ("http", "https"):
        return forwarded
    return request.url.scheme


def form_ok(
    request: Request[Any, Any, Any], state: State, nonce: str | None, form: Mapping[str, Any]
) -> bool:
    """Whether a POSTed form is same-origin and carries the CSRF token of nonce's session."""
    services: Services = state.services
    return same_origin(request) and csrf_ok(services.keyring, nonce, form.get("csrf"))
