"""The console's session: the user's bearer sealed into an HttpOnly cookie, and CSRF tokens.

The cookie is the only place the bearer travels after sign-in: sealed with the service's
keyring (AES-GCM, bound to its purpose), so any replica sharing the keyring opens it and
nothing in a page, a URL or a log line carries it. Each session has a random nonce; a form's
CSRF token is a keyed digest of that nonce, which a page on another origin cannot compute
(it can neither read the cookie nor knows the keyring).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
import time
from dataclasses import dataclass

import msgspec

from runtime.security import Keyring, KeyringError, SealedSecret, SecretToken

COOKIE = "wf_console"
# Before sign-in: the nonce the sign-in form's CSRF token is derived from (login CSRF).
PRE_COOKIE = "wf_console_pre"
_SESSION_AAD = b"workflow-console-session-v1"
_CSRF_PURPOSE = "workflow-console-csrf-v1"
MAX_COOKIE_CHARS = 3800


class _Payload(msgspec.Struct, frozen=True):
    t: str  # the user token
    n: str  # the session nonce
    e: int  # expiry (the token's exp), Unix seconds


@dataclass(frozen=True)
class Session:
    """An opened session cookie: the bearer (never shown), its nonce and expiry."""

    token: SecretToken
    nonce: str
    expires_at: int


def new_nonce() -> str:
    """A fresh random nonce for a session or a sign-in form."""
    return secrets.token_urlsafe(24)


def seal_session(keyring: Keyring, token: str, expires_at: int) -> str:
    """The cookie value of a new session for token."""
    payload = msgspec.json.encode(_Payload(t=token, n=new_nonce(), e=expires_at))
    sealed = keyring.seal(payload, _SESSION_AAD)
    return base64.urlsafe_b64encode(msgspec.msgpack.encode(sealed)).decode("ascii").rstrip("=")


def open_session(keyring: Keyring, value: str | None) -> Session | None:
    """The session a cookie value holds, or None when absent, tampered with or expired."""
    if not value or len(value) > MAX_COOKIE_CHARS:
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        sealed = msgspec.msgpack.decode(raw, type=SealedSecret)
        payload = msgspec.json.decode(keyring.open(sealed, _SESSION_AAD), type=_Payload)
    except (binascii.Error, ValueError, msgspec.DecodeError, KeyringError):
        return None
    if payload.e <= time.time():
        return None
    return Session(SecretToken(payload.t), payload.n, payload.e)


def csrf_token(keyring: Keyring, nonce: str) -> str:
    """The CSRF token of every form of the session (or sign-in form) with that nonce."""
    return keyring.keyed_digest(_CSRF_PURPOSE, nonce.encode("ascii"))


def csrf_ok(keyring: Keyring, nonce: str | None, sent: object) -> bool:
    """Whether a form's token is the one the nonce's session issued."""
    if not nonce or not isinstance(sent, str) or not sent:
        return False
    return hmac.compare_digest(csrf_token(keyring, nonce).encode(), sent.encode())
