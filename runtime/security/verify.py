"""Bearer verification: pinned algorithm, signature, time claims, issuer, audience, token kind."""

from __future__ import annotations

import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from enum import Enum
from typing import Any

import jwt

from runtime.errors import AuthenticationError
from runtime.security.keys import KeySet, TrustedKey
from runtime.security.settings import SecuritySettings, TokenTrust

# Bounds parsing work on hostile input; real bearers are a few kilobytes at most.
MAX_TOKEN_LENGTH = 16_384
# A Gateway sends the same two bearers on every call of a session: a signature verified once is
# remembered (by the token's SHA-256, never its text) for a short while and never past its exp.
VERIFIED_CACHE_SIZE = 4_096
VERIFIED_CACHE_SECONDS = 120.0
# 9999-12-31T23:59:59Z: a later time claim cannot be a datetime, so it is refused as malformed
# (401) here instead of failing wherever the claim is later turned into a time (a 500).
MAX_TIME_CLAIM = 253_402_300_799
_TIME_CLAIMS = ("exp", "nbf", "iat")
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


class TokenKind(Enum):
    """Which bearer a token must be: the acting user's, or a calling application's."""

    USER = "user"
    APP = "app"

    @property
    def label(self) -> str:
        """How messages name this bearer."""
        return "user token" if self is TokenKind.USER else "scope token"


def first_string(claims: dict[str, Any], *names: str) -> str | None:
    """The first non-empty string claim among names."""
    for name in names:
        value = claims.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def client_id_of(claims: dict[str, Any], settings: SecuritySettings) -> str | None:
    """The OAuth client id of a token (configured claim, then "cid")."""
    return first_string(claims, settings.claims.client_id, "cid", "azp")


def is_application_token(
    claims: dict[str, Any], settings: SecuritySettings, header_type: str | None = None
) -> bool:
    """An application token: subject equals its client id (RFC 9068), or a configured mark."""
    client_id = client_id_of(claims, settings)
    if client_id is not None and claims.get("sub") == client_id:
        return True
    marks = settings.application_token
    if header_type is not None and header_type.lower() in {t.lower() for t in marks.header_types}:
        return True
    token_type = claims.get(marks.type_claim) if marks.type_claim else None
    return isinstance(token_type, str) and token_type in marks.type_values


class TokenVerifier:
    """Verifies one bearer against the trusted keys and the expectations for its kind."""

    def __init__(
        self,
        settings: SecuritySettings,
        keyset: KeySet,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings = settings
        self._keyset = keyset
        self._pinned = frozenset(settings.algorithms)
        self._clock = clock
        # (kind, sha256 of the token) -> (claims, valid until); only successes are remembered.
        self._verified: OrderedDict[tuple[TokenKind, bytes], tuple[dict[str, Any], float]] = (
            OrderedDict()
        )

    def verify(self, token: str, expected: TokenKind) -> dict[str, Any]:
        """Verify token as the expected kind and return its claims, or raise AuthenticationError."""
        label = expected.label
        if not token or len(token) > MAX_TOKEN_LENGTH or not _COMPACT_JWS.fullmatch(token):
            raise AuthenticationError(f"{label} is malformed")
        key = (expected, hashlib.sha256(token.encode("ascii")).digest())
        now = self._clock()
        remembered = self._verified.get(key)
        if remembered is not None:
            claims, until = remembered
            if now < until:
                return dict(claims)
            del self._verified[key]
        claims = self._verify_signed(token, expected, label)
        self._remember(key, claims, now)
        return dict(claims)

    def _remember(self, key: tuple[TokenKind, bytes], claims: dict[str, Any], now: float) -> None:
        # Never past exp (plus the accepted skew): an expired token is verified again, and refused.
        until = min(
            now + VERIFIED_CACHE_SECONDS, float(claims["exp"]) + self._settings.clock_skew_seconds
        )
        self._verified[key] = (claims, until)
        while len(self._verified) > VERIFIED_CACHE_SIZE:
            self._verified.popitem(last=False)

    def _verify_signed(self, token: str, expected: TokenKind, label: str) -> dict[str, Any]:
        algorithm, kid = self._pinned_header(token, label)
        candidates = self._keyset.candidates(algorithm, kid)
        if not candidates:
            raise AuthenticationError(f"{label} could not be verified")
        trust = (
            self._settings.user_token if expected is TokenKind.USER else self._settings.app_token
        )
        claims = self._decode(token, algorithm, candidates, trust, label)
        _check_time_claims(claims, label)
        self._check_kind(claims, _header_type(token), expected, label)
        return claims

    def _pinned_header(self, token: str, label: str) -> tuple[str, str | None]:
        # The algorithm is checked before any key is touched, so "none" and HS* (public key used
        # as an HMAC secret) never reach a verifier.
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationError(f"{label} is malformed") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self._pinned:
            raise AuthenticationError(f"{label} uses an algorithm that is not accepted")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise AuthenticationError(f"{label} is malformed")
        return algorithm, kid

    def _decode(
        self,
        token: str,
        algorithm: str,
        candidates: list[TrustedKey],
        trust: TokenTrust,
        label: str,
    ) -> dict[str, Any]:
        if not trust.issuers or not trust.audiences:
            # Fail closed: with no configured issuer or audience nothing is trusted.
            raise AuthenticationError(f"{label} could not be verified")
        for candidate in candidates:
            try:
                return jwt.decode(
                    token,
                    key=candidate.key,
                    algorithms=[algorithm],
                    issuer=trust.issuers,
                    audience=trust.audiences,
                    leeway=self._settings.clock_skew_seconds,
                    options={"require": ["exp", "iss", "aud", "sub"], "verify_sub": True},
                )
            except jwt.InvalidSignatureError:
                continue  # another key without a kid may have signed it (rotation)
            except jwt.PyJWTError as exc:
                raise AuthenticationError(_describe(exc, label)) from None
        raise AuthenticationError(f"{label} could not be verified")

    def _check_kind(
        self, claims: dict[str, Any], header_type: str | None, expected: TokenKind, label: str
    ) -> None:
        application = is_application_token(claims, self._settings, header_type)
        if expected is TokenKind.USER and application:
            raise AuthenticationError("an application token is not accepted as the user token")
        if expected is TokenKind.APP and not application:
            raise AuthenticationError(f"{label} is not an application token")


def _check_time_claims(claims: dict[str, Any], label: str) -> None:
    """exp, nbf and iat, when present, are numbers within the years 1970 to 9999."""
    for name in _TIME_CLAIMS:
        value = claims.get(name)
        if value is None and name not in claims:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise AuthenticationError(f"{label} has a malformed {name} claim")
        if not 0 <= value <= MAX_TIME_CLAIM:
            raise AuthenticationError(f"{label} has an out-of-range {name} claim")


def _header_type(token: str) -> str | None:
    """The `typ` header of a token whose signature already verified."""
    typ = jwt.get_unverified_header(token).get("typ")
    return typ if isinstance(typ, str) else None


def _describe(exc: jwt.PyJWTError, label: str) -> str:
    """A safe message: names the failed check, never the token or the key."""
    if isinstance(exc, jwt.ExpiredSignatureError):
        return f"{label} has expired"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return f"{label} is not yet valid"
    if isinstance(exc, jwt.InvalidIssuerError):
        return f"{label} has an untrusted issuer"
    if isinstance(exc, jwt.InvalidAudienceError):
        return f"{label} is not meant for this service"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"{label} lacks a required claim"
    return f"{label} could not be verified"
