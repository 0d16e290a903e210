"""A stand-in OpenID Connect issuer for the console's sign-in tests: discovery, an authorization
endpoint that signs in one configured person at once, and a token endpoint that checks PKCE."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from litestar import Litestar, Request, Response, get, post
from litestar.datastructures import State

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST

CLIENT_ID = "workflow-console"


@dataclass
class IssuerState:
    """Who the issuer signs in, the codes it issued and what each exchange proved."""

    identity: DevIdentity
    user_id: str = "ann"
    roles: tuple[str, ...] = ("approver",)
    url: str = ""
    codes: dict[str, tuple[str, str]] = field(default_factory=dict)
    challenge_methods: list[str] = field(default_factory=list)
    exchanges: list[str] = field(default_factory=list)  # "ok" or why it was refused


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


@get("/.well-known/openid-configuration")
async def discovery(state: State) -> dict[str, Any]:
    """The issuer's OpenID Connect discovery document."""
    issuer: IssuerState = state.issuer
    return {
        "issuer": issuer.url,
        "authorization_endpoint": f"{issuer.url}/authorize",
        "token_endpoint": f"{issuer.url}/token",
        "code_challenge_methods_supported": ["S256"],
    }


@get("/authorize")
async def authorize(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    """Sign the configured person in at once and send the browser back with a code."""
    issuer: IssuerState = state.issuer
    query = request.query_params
    if query.get("response_type") != "code" or query.get("client_id") != CLIENT_ID:
        return Response(b"bad request", status_code=400)
    issuer.challenge_methods.append(str(query.get("code_challenge_method")))
    code = secrets.token_urlsafe(16)
    issuer.codes[code] = (str(query.get("code_challenge")), str(query.get("redirect_uri")))
    back = f"{query.get('redirect_uri')}?" + urlencode({"code": code, "state": query.get("state")})
    return Response(b"", status_code=302, headers={"Location": back})


@post("/token", status_code=200)
async def token(request: Request[Any, Any, Any], state: State) -> Response[dict[str, Any]]:
    """Exchange a code for an access token when its PKCE verifier matches the challenge."""
    issuer: IssuerState = state.issuer
    form = await request.form()
    issued = issuer.codes.pop(str(form.get("code")), None)
    why = None
    if issued is None:
        why = "unknown code"
    elif form.get("redirect_uri") != issued[1] or form.get("client_id") != CLIENT_ID:
        why = "another client or redirect"
    elif _s256(str(form.get("code_verifier", ""))) != issued[0]:
        why = "the PKCE verifier does not match"
    issuer.exchanges.append(why or "ok")
    if why is not None:
        return Response({"error": "invalid_grant"}, status_code=400)
    access = issuer.identity.user_token(
        host_id=HOST, user_id=issuer.user_id, roles=issuer.roles, client_id="portal"
    )
    return Response({"access_token": access, "token_type": "Bearer", "expires_in": 3600})


def issuer_app(issuer: IssuerState) -> Litestar:
    """The stand-in issuer's ASGI app."""
    app = Litestar([discovery, authorize, token], debug=False, logging_config=None)
    app.state.issuer = issuer
    return app
