"""Caller verification at the Gateway entry: a user bearer, and an app bearer if one is sent.

Seed 000 "Operator setup": Authorization must hold a valid user bearer (an application token
there is refused, whatever claims it carries); a caller's X-Scope-Token is optional, but when
present it must verify as an application bearer. The scope token never stands in for the user.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runtime.errors import AuthenticationError
from runtime.security import (
    KeySet,
    SecretToken,
    SecuritySettings,
    TokenKind,
    TokenVerifier,
    bearer_token,
    claim_set,
    normalize_host_id,
)

SCOPE_TOKEN_HEADER = "x-scope-token"


@dataclass(frozen=True, slots=True)
class Caller:
    """A verified caller: who, of which host, with which roles, and the bearer to forward."""

    subject: str
    host_id: str | None
    roles: frozenset[str]
    user_token: SecretToken

    def holds_any(self, roles: frozenset[str] | tuple[str, ...]) -> bool:
        """True when the caller holds at least one of roles."""
        return not self.roles.isdisjoint(roles)


class CallerVerifier:
    """Verifies a request's bearers with the service's trusted keys and claim names."""

    def __init__(self, settings: SecuritySettings, keyset: KeySet | None = None) -> None:
        self._settings = settings
        self._verifier = TokenVerifier(settings, keyset or KeySet.from_settings(settings))

    def verify(self, headers: Mapping[str, str]) -> Caller:
        """The caller of a request, or AuthenticationError (the transport answers HTTP 401)."""
        token = bearer_token(headers.get("authorization"), "Authorization bearer")
        claims = self._verifier.verify(token, TokenKind.USER)
        scope = headers.get(SCOPE_TOKEN_HEADER)
        if scope is not None and scope.strip():
            # Sent means it must verify (a blank header counts as none, as on the service).
            self._verifier.verify(bearer_token(scope, "X-Scope-Token bearer"), TokenKind.APP)
        names = self._settings.claims
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise AuthenticationError("user token lacks a subject")
        return Caller(
            subject=subject,
            host_id=normalize_host_id(claims.get(names.host)),
            roles=claim_set(claims, names.roles),
            user_token=SecretToken(token),
        )


class RequestCaller:
    """One request's caller, verified at most once: its tools/list and tools/call share it."""

    __slots__ = ("_caller", "_failure", "_headers", "_verifier")

    def __init__(self, verifier: CallerVerifier, headers: Mapping[str, str]) -> None:
        self._verifier = verifier
        self._headers = headers
        self._caller: Caller | None = None
        self._failure: AuthenticationError | None = None

    def get(self) -> Caller:
        """The verified caller, or the same AuthenticationError every time."""
        if self._caller is not None:
            return self._caller
        if self._failure is None:
            try:
                self._caller = self._verifier.verify(self._headers)
                return self._caller
            except AuthenticationError as failure:
                self._failure = failure
        raise AuthenticationError(self._failure.message)
