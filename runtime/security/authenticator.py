"""Authenticate a call from its two bearers and build the invocation context."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from runtime.errors import AuthenticationError, policy_denied
from runtime.security.context import InvocationContext, SecretToken
from runtime.security.keys import KeySet
from runtime.security.settings import SecuritySettings
from runtime.security.verify import TokenKind, TokenVerifier, client_id_of, first_string

_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(\S+)")


def normalize_host_id(value: object) -> str | None:
    """The lower-case canonical form of a UUID string, or None when value is not one."""
    if not isinstance(value, str):
        return None
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return None
    # uuid.UUID also accepts braces, "urn:uuid:" and missing hyphens; only the plain form counts.
    canonical = str(parsed)
    return canonical if canonical == value.lower() else None


def claim_set(claims: dict[str, Any], name: str) -> frozenset[str]:
    """A list claim or a space-separated string claim as a set; anything else is empty."""
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(item for item in value if isinstance(item, str) and item)
    return frozenset()


def bearer_token(header: str | None, label: str) -> str:
    """The token of an "Authorization: Bearer <jwt>"-style header value."""
    if header is None or not header.strip():
        raise AuthenticationError(f"{label} is missing")
    match = _BEARER.fullmatch(header.strip())
    if match is None:
        raise AuthenticationError(f"{label} is not a Bearer credential")
    return match.group(1)


def _present(header: str | None) -> bool:
    return header is not None and bool(header.strip())


class Authenticator:
    """Verifies the user bearer and the Gateway scope bearer of every call."""

    def __init__(self, settings: SecuritySettings, keyset: KeySet) -> None:
        self._settings = settings
        self._verifier = TokenVerifier(settings, keyset)

    def authenticate(
        self, authorization_header: str | None, scope_token_header: str | None
    ) -> InvocationContext:
        """Both bearers verified and consistent, or AuthenticationError / POLICY_DENIED."""
        user_token = bearer_token(authorization_header, "Authorization bearer")
        app_token = bearer_token(scope_token_header, "X-Scope-Token bearer")
        user_claims = self._verifier.verify(user_token, TokenKind.USER)
        app_claims = self._verifier.verify(app_token, TokenKind.APP)
        host_id = normalize_host_id(user_claims.get(self._settings.claims.host))
        if host_id is None:
            raise AuthenticationError("user token does not name a valid host")
        client_id = client_id_of(app_claims, self._settings)
        service_id = first_string(app_claims, self._settings.claims.service_id) or client_id
        if client_id is None or service_id is None:
            raise AuthenticationError("scope token does not name its client")
        self._check_caller(app_claims, service_id, host_id)
        return self._context(user_claims, user_token, host_id, service_id, client_id)

    def authenticate_user(self, user_token: str, caller_service_id: str) -> InvocationContext:
        """The context of a verified user token alone, for the service's own first-party pages.

        The console is Workflow itself, not a calling application: no scope token, no caller
        policy; the host, user, roles and client principal are the user token's, as on MCP.
        """
        user_claims = self._verifier.verify(user_token, TokenKind.USER)
        host_id = normalize_host_id(user_claims.get(self._settings.claims.host))
        if host_id is None:
            raise AuthenticationError("user token does not name a valid host")
        return self._context(user_claims, user_token, host_id, caller_service_id, caller_service_id)

    def check_present(
        self,
        authorization_header: str | None,
        scope_token_header: str | None,
        *,
        user_required: bool,
    ) -> None:
        """Verify each bearer that is present (the user's also when absent and user_required).

        For MCP methods other than tools/call: no context is built and no caller policy applies,
        but a credential that is sent must be a valid one (MCP authorization: 401).
        """
        if user_required or _present(authorization_header):
            user_token = bearer_token(authorization_header, "Authorization bearer")
            self._verifier.verify(user_token, TokenKind.USER)
        if _present(scope_token_header):
            app_token = bearer_token(scope_token_header, "X-Scope-Token bearer")
            self._verifier.verify(app_token, TokenKind.APP)

    def _check_caller(self, app_claims: dict[str, Any], service_id: str, host_id: str) -> None:
        if service_id not in self._settings.allowed_caller_service_ids:
            raise policy_denied("the calling service is not allowed to call Workflow")
        if normalize_host_id(app_claims.get(self._settings.claims.host)) != host_id:
            raise policy_denied("the user token and the scope token name different hosts")
        environment = self._settings.app_environment
        token_environment = app_claims.get(self._settings.claims.environment)
        if environment is not None and token_environment != environment:
            raise policy_denied("the scope token was issued for another environment")

    def _context(
        self,
        claims: dict[str, Any],
        token: str,
        host_id: str,
        service_id: str,
        client_id: str,
    ) -> InvocationContext:
        names = self._settings.claims
        subject = claims["sub"]
        exp = claims["exp"]
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise AuthenticationError("user token has an invalid expiry")
        return InvocationContext(
            host_id=host_id,
            user_id=first_string(claims, names.user_id, "sub") or subject,
            subject=subject,
            roles=claim_set(claims, names.roles),
            positions=claim_set(claims, names.positions),
            caller_service_id=service_id,
            client_id=client_id,
            user_token=SecretToken(token),
            user_token_expires_at=datetime.fromtimestamp(exp, tz=UTC),
            user_client_id=client_id_of(claims, self._settings),
        )
