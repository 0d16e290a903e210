"""Tokens for identity tests: the request headers of dev tokens, and hostile ones (alg none, HMAC
keyed with the public key)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from runtime.security.devtools import (
    DEV_AUDIENCE,
    DEV_HOST_ID,
    DEV_ISSUER,
    DEV_USER_ID,
    DevIdentity,
)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def user_claims(**overrides: Any) -> dict[str, Any]:
    """Claims of a valid-looking user token for the dev host."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": DEV_ISSUER,
        "aud": DEV_AUDIENCE,
        "sub": DEV_USER_ID,
        "uid": DEV_USER_ID,
        "host": DEV_HOST_ID,
        "roles": ["workflow-admin"],
        "client_id": "dev-portal",
        "iat": now,
        "exp": now + 600,
    }
    claims.update(overrides)
    return claims


def unsigned_token(claims: dict[str, Any]) -> str:
    """A token with alg none and an empty signature."""
    header = _b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{_b64url(json.dumps(claims).encode())}."


def hs256_with_public_key(identity: DevIdentity, claims: dict[str, Any]) -> str:
    """The key-confusion attack: HS256 keyed with the verifier's public key PEM."""
    public_pem = identity.paths.public_key.read_bytes()
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": identity.kid}).encode())
    payload = _b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = _b64url(hmac.new(public_pem, signing_input, hashlib.sha256).digest())
    return f"{header}.{payload}.{signature}"


def auth_headers(
    identity: DevIdentity, user_token: str | None = None, app_token: str | None = None
) -> dict[str, str]:
    """Authorization and X-Scope-Token headers (identity's default dev tokens when not given)."""
    user = user_token if user_token is not None else identity.user_token()
    app = app_token if app_token is not None else identity.app_token()
    return {"Authorization": f"Bearer {user}", "X-Scope-Token": f"Bearer {app}"}
