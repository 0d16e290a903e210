"""The development identity's RFC 8693 Token Exchange endpoint (an ASGI app). Never for production.

It authenticates its one client with HTTP Basic, verifies the subject token exactly as the
service verifies a user token, and answers a fresh user token with the same identity claims.
"""

from __future__ import annotations

import base64
import hmac
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

from runtime.errors import AuthenticationError
from runtime.security.keys import KeySet
from runtime.security.settings import SecuritySettings
from runtime.security.verify import TokenKind, TokenVerifier

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
SUBJECT_TYPES = frozenset({ACCESS_TOKEN_TYPE, "urn:ietf:params:oauth:token-type:jwt"})
DEV_EXCHANGE_CLIENT_ID = "workflow-runtime"
# The identity claims an exchanged token keeps; times and ids are new.
_KEPT = ("iss", "aud", "sub", "uid", "host", "roles", "positions", "client_id", "cid")
MAX_FORM_BYTES = 65_536

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Sign = Callable[[dict[str, Any]], str]


@dataclass
class DevTokenExchange:
    """POST form grant_type=token-exchange, subject_token, subject_token_type -> a new token."""

    sign: Sign
    security: SecuritySettings
    client_secret: str
    client_id: str = DEV_EXCHANGE_CLIENT_ID
    ttl: int = 3600
    exchanges: int = 0  # how many tokens it issued (tests read it)
    _verifier: TokenVerifier | None = field(default=None, repr=False)

    def _verify(self, token: str) -> dict[str, Any]:
        if self._verifier is None:
            self._verifier = TokenVerifier(self.security, KeySet.from_settings(self.security))
        return self._verifier.verify(token, TokenKind.USER)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await read_form(receive)
        if scope["method"] != "POST":
            await answer(send, 405, {"error": "invalid_request"})
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if not basic_client(headers.get("authorization"), self.client_id, self.client_secret):
            await answer(send, 401, {"error": "invalid_client"}, challenge=True)
            return
        status, payload = self._exchange(parse_qs(body.decode("ascii", errors="replace")))
        if status == 200:
            self.exchanges += 1
        await answer(send, status, payload)

    def _exchange(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        def one(name: str) -> str | None:
            values = form.get(name, [])
            return values[0] if len(values) == 1 else None

        if one("grant_type") != GRANT_TYPE:
            return 400, {"error": "unsupported_grant_type"}
        subject = one("subject_token")
        if subject is None or one("subject_token_type") not in SUBJECT_TYPES:
            return 400, {"error": "invalid_request"}
        try:
            claims = self._verify(subject)
        except AuthenticationError:
            return 400, {"error": "invalid_grant"}
        now = int(time.time())
        issued = {name: claims[name] for name in _KEPT if name in claims}
        issued.update(
            {"iat": now, "exp": now + self.ttl, "jti": str(uuid.uuid4())},
            act={"sub": self.client_id},
        )
        return 200, {
            "access_token": self.sign(issued),
            "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer",
            "expires_in": self.ttl,
        }


def basic_client(header: str | None, client_id: str, client_secret: str) -> bool:
    """Whether an Authorization header authenticates the client (HTTP Basic, RFC 6749 2.3.1)."""
    if header is None or not header.lower().startswith("basic "):
        return False
    try:
        decoded = base64.b64decode(header[6:].strip()).decode("utf-8")
    except ValueError:
        return False
    given_id, _, secret = decoded.partition(":")
    return unquote(given_id) == client_id and hmac.compare_digest(
        unquote(secret).encode(), client_secret.encode()
    )


async def read_form(receive: Receive) -> bytes:
    """The request body, at most MAX_FORM_BYTES of it."""
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if len(body) > MAX_FORM_BYTES or not message.get("more_body"):
            return body[:MAX_FORM_BYTES]


async def answer(send: Send, status: int, payload: dict[str, Any], challenge: bool = False) -> None:
    """A JSON answer that no cache keeps; a 401 names the Basic scheme."""
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    if challenge:
        headers.append((b"www-authenticate", b'Basic realm="dev-identity"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})
