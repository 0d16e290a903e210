"""The Gateway's own application bearer for its calls to Workflow (sent as X-Scope-Token).

Configured (gateway.app_token, or gateway.app_token_file re-read when it changes), or in
development minted from the dev identity, per host (Workflow requires the scope token's host to
be the user's), and minted again before it expires. The token is never logged: it is held as a
SecretToken and only revealed into the outgoing header.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import jwt

from gateway.settings import GatewaySettings
from runtime.security import DEV_HOST_ID, DevIdentity, SecretToken

DEV_TOKEN_TTL_S = 3600
# Mint again when less than this is left, so a token never expires during a long wait.
REMINT_MARGIN_S = 300


class AppTokenSource(Protocol):
    """Where the Gateway's application bearer comes from."""

    def token_for(self, host_id: str | None) -> SecretToken:
        """The bearer to send with a call made for a user of host_id."""
        ...


class GatewayConfigurationError(ValueError):
    """The Gateway cannot run as configured (the message says what to set)."""


class StaticToken:
    """A configured bearer (the operator's application identity for one host)."""

    def __init__(self, token: str) -> None:
        self._token = SecretToken(token.strip())

    def token_for(self, host_id: str | None) -> SecretToken:
        """The configured token, whatever the host."""
        return self._token


class FileToken:
    """A bearer read from a file, read again when the file changes (rotation without restart)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._token = SecretToken("")
        self.token_for(None)

    def token_for(self, host_id: str | None) -> SecretToken:
        """The file's token (re-read when its mtime or size changed)."""
        stat = os.stat(self._path)
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if stamp != self._stamp:
                text = self._path.read_text(encoding="ascii").strip()
                if not text:
                    raise GatewayConfigurationError(f"{self._path} holds no token")
                self._token, self._stamp = SecretToken(text), stamp
            return self._token


class DevMintedToken:
    """Development only: tokens signed by the dev identity that `make run` trusts."""

    def __init__(self, identity: DevIdentity, *, clock: Callable[[], float] = time.time) -> None:
        self._identity = identity
        self._clock = clock
        self._lock = threading.Lock()
        self._minted: dict[str, tuple[SecretToken, float]] = {}

    def token_for(self, host_id: str | None) -> SecretToken:
        """A token for host_id (the dev host when the user names none), fresh enough."""
        host = host_id or DEV_HOST_ID
        now = self._clock()
        with self._lock:
            held = self._minted.get(host)
            if held is None or held[1] - now < REMINT_MARGIN_S:
                token = self._identity.app_token(host_id=host, ttl=DEV_TOKEN_TTL_S)
                expires = float(jwt.decode(token, options={"verify_signature": False})["exp"])
                held = (SecretToken(token), expires)
                if len(self._minted) > 1000:
                    self._minted.clear()  # bounded: hosts come from verified user tokens
                self._minted[host] = held
            return held[0]


def app_token_source(settings: GatewaySettings, identity: DevIdentity | None) -> AppTokenSource:
    """The configured source; the dev identity only when no token is configured."""
    if settings.app_token:
        return StaticToken(settings.app_token)
    if settings.app_token_file:
        return FileToken(Path(settings.app_token_file))
    if identity is not None:
        return DevMintedToken(identity)
    raise GatewayConfigurationError(
        "the Gateway needs its application bearer for Workflow: set gateway.app_token_file "
        "or WORKFLOW_GATEWAY_APP_TOKEN (development: run without trusted keys to mint one)"
    )
