"""Sign-in with OpenID Connect: the authorization code flow with PKCE (RFC 7636, S256).

The console is the client. Its state, PKCE verifier and redirect URI travel in a sealed,
HttpOnly cookie (SameSite=Lax: the issuer's redirect back is a cross-site navigation) that
lives ten minutes and is cleared on return. The access token the issuer answers with is then
verified exactly as an MCP user bearer is (Authenticator), and kept like a development sign-in's:
only in the sealed session cookie.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus, urlencode

import httpx
import msgspec

from runtime.security import Keyring, KeyringError, SealedSecret
from runtime.settings import ConsoleSettings

FLOW_COOKIE = "wf_console_oidc"
FLOW_SECONDS = 600
CALLBACK_PATH = "/console/oidc/callback"
_FLOW_AAD = b"workflow-console-oidc-flow-v1"
TIMEOUT_S = 10.0
DISCOVERY_TTL_S = 300.0


class OidcError(Exception):
    """The sign-in could not complete: a message for the person, never a secret."""


class _Flow(msgspec.Struct, frozen=True):
    s: str  # state
    v: str  # PKCE code verifier
    r: str  # redirect URI
    e: int  # expiry, Unix seconds


@dataclass(frozen=True)
class Started:
    """Where to send the browser, and the sealed flow cookie to set."""

    location: str
    flow_cookie: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def code_challenge(verifier: str) -> str:
    """The S256 code challenge of a PKCE verifier."""
    return _b64(hashlib.sha256(verifier.encode("ascii")).digest())


class OidcClient:
    """The console's OpenID Connect client for the configured issuer."""

    def __init__(
        self, settings: ConsoleSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        if settings.oidc_issuer is None or settings.oidc_client_id is None:
            raise ValueError("OpenID Connect sign-in needs console.oidc_issuer and _client_id")
        self.issuer = settings.oidc_issuer.rstrip("/")
        self.client_id = settings.oidc_client_id
        self._settings = settings
        self._http = httpx.AsyncClient(transport=transport, timeout=TIMEOUT_S, trust_env=False)
        self._metadata: tuple[float, dict[str, Any]] | None = None

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._http.aclose()

    def redirect_uri(self, origin: str) -> str:
        """The configured redirect URI, else the console's callback on origin."""
        return self._settings.oidc_redirect_uri or origin.rstrip("/") + CALLBACK_PATH

    async def _discovered(self) -> dict[str, Any]:
        held = self._metadata
        if held is not None and time.monotonic() - held[0] < DISCOVERY_TTL_S:
            return held[1]
        url = f"{self.issuer}/.well-known/openid-configuration"
        try:
            answer = await self._http.get(url)
            document = answer.json() if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            document = None
        if not isinstance(document, dict):
            raise OidcError("the sign-in service's configuration could not be read")
        if str(document.get("issuer", "")).rstrip("/") != self.issuer:
            raise OidcError("the sign-in service names another issuer than the configured one")
        for name in ("authorization_endpoint", "token_endpoint"):
            if not isinstance(document.get(name), str):
                raise OidcError(f"the sign-in service's configuration lacks {name}")
        self._metadata = (time.monotonic(), document)
        return document

    async def start(self, keyring: Keyring, origin: str) -> Started:
        """A new flow: the issuer's authorization URL and the sealed flow cookie."""
        metadata = await self._discovered()
        state, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        redirect_uri = self.redirect_uri(origin)
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": redirect_uri,
                "scope": " ".join(self._settings.oidc_scopes),
                "state": state,
                "code_challenge": code_challenge(verifier),
                "code_challenge_method": "S256",
            }
        )
        endpoint = str(metadata["authorization_endpoint"])
        separator = "&" if "?" in endpoint else "?"
        flow = _Flow(s=state, v=verifier, r=redirect_uri, e=int(time.time()) + FLOW_SECONDS)
        sealed = keyring.seal(msgspec.json.encode(flow), _FLOW_AAD)
        cookie = _b64(msgspec.msgpack.encode(sealed))
        return Started(f"{endpoint}{separator}{query}", cookie)

    async def finish(
        self, keyring: Keyring, flow_cookie: str | None, state: str | None, code: str | None
    ) -> str:
        """The access token for the code, once the state matches this browser's flow."""
        flow = _open_flow(keyring, flow_cookie)
        if flow is None or not state or not secrets.compare_digest(flow.s, state):
            raise OidcError("the sign-in did not start here or took too long: please try again")
        if not code or len(code) > 4096:
            raise OidcError("the sign-in service sent no authorization code")
        metadata = await self._discovered()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": flow.r,
            "client_id": self.client_id,
            "code_verifier": flow.v,
        }
        headers = {}
        if self._settings.oidc_client_secret_file is not None:
            secret = Path(self._settings.oidc_client_secret_file).read_text("utf-8").strip()
            headers["Authorization"] = _basic(self.client_id, secret)
        try:
            endpoint = str(metadata["token_endpoint"])
            answer = await self._http.post(endpoint, data=form, headers=headers)
            body = answer.json()
        except (httpx.HTTPError, ValueError):
            raise OidcError("the sign-in service did not answer the code exchange") from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if answer.status_code != 200 or not isinstance(token, str) or not token:
            raise OidcError("the sign-in service refused the code exchange")
        return token


def _basic(client_id: str, secret: str) -> str:
    """client_secret_basic (RFC 6749 2.3.1): each part form-encoded, then Basic."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


def _open_flow(keyring: Keyring, value: str | None) -> _Flow | None:
    if not value or len(value) > 2048:
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        sealed = msgspec.msgpack.decode(raw, type=SealedSecret)
        flow = msgspec.json.decode(keyring.open(sealed, _FLOW_AAD), type=_Flow)
    except (binascii.Error, ValueError, msgspec.DecodeError, KeyringError):
        return None
    return flow if flow.e > time.time() else None
