"""The run credential: sealed at admission, opened per outbound call, picked by the selector."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jwt

from runtime.errors import AuthenticationError
from runtime.security import (
    Keyring,
    KeyringError,
    KeySet,
    SealedSecret,
    SecretToken,
    SecuritySettings,
    TokenKind,
    TokenVerifier,
)

# Verifies the token (signature, issuer, audience, time) and returns its claims, or raises
# AuthenticationError. None means the token's own exp is the only check available.
TokenCheck = Callable[[str], dict[str, Any]]


@dataclass(frozen=True)
class RunToken:
    """The token an outbound call of a run carries, and whether the selector exchanged it.

    An exchanged token changes where the run's protected HTTP calls go: the Gateway origin
    (seed 000 "Run credential selection").
    """

    token: SecretToken
    exchanged: bool = False


# Every admission reads the caller's exp to schedule its run (launch, start): a Gateway sends
# the same bearer on every call of a session, and a full PyJWT parse per call cost more CPU
# than the rest of the token handling. The exp of a token's text never changes, so the answer
# is kept (by the token's SHA-256, never its text) in a bounded table, oldest dropped first.
EXPIRY_CACHE_SIZE = 4_096
_expiries: OrderedDict[bytes, datetime | None] = OrderedDict()


def token_check_for(security: SecuritySettings, keyset: KeySet | None = None) -> TokenCheck:
    """Verify a run's user token exactly as the service verifies a caller's (fails closed)."""
    verifier = TokenVerifier(
        security, keyset if keyset is not None else KeySet.from_settings(security)
    )

    def check(token: str) -> dict[str, Any]:
        return verifier.verify(token, TokenKind.USER)

    return check


def associated_data(host_id: str, process_id: str) -> bytes:
    """The AAD binding a sealed credential to its run: a ciphertext moved to another run fails."""
    return f"workflow-run-credential:{host_id}:{process_id}".encode()


def seal_credential(
    keyring: Keyring, token: SecretToken, host_id: str, process_id: str
) -> SealedSecret:
    """Seal the user's token for one run (refuses when the keyring has no active key)."""
    keyring.require_usable_key()
    return keyring.seal(token.reveal().encode("utf-8"), associated_data(host_id, process_id))


def open_credential(
    keyring: Keyring, sealed: SealedSecret, host_id: str, process_id: str
) -> SecretToken:
    """Open a run's sealed token; a missing key or tampering is an authentication failure."""
    try:
        plain = keyring.open(sealed, associated_data(host_id, process_id))
    except KeyringError:
        raise AuthenticationError("the run credential cannot be opened") from None
    return SecretToken(plain.decode("utf-8"))


def token_expiry(token: SecretToken) -> datetime | None:
    """The token's exp claim, read without verification (only to schedule, never to trust)."""
    text = token.reveal()
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    try:
        return _expiries[key]
    except KeyError:
        pass
    expiry = _read_expiry(text)
    _expiries[key] = expiry
    while len(_expiries) > EXPIRY_CACHE_SIZE:
        _expiries.popitem(last=False)
    return expiry


def _read_expiry(text: str) -> datetime | None:
    try:
        claims = jwt.decode(text, options={"verify_signature": False})
    except jwt.PyJWTError:
        return None
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    return datetime.fromtimestamp(exp, UTC)


def select_run_token(
    token: SecretToken,
    expires_at: datetime | None,
    *,
    margin_seconds: int,
    check: TokenCheck | None = None,
    now: datetime | None = None,
) -> SecretToken:
    """Seed 000 "Run credential selection" for a run without a LONG registration.

    1. The original token while it verifies and is more than the margin before exp.
    2. (A LONG exchange: no run of this service has one.)
    3. Otherwise the original token while it still verifies; an authentication error after.
    Both remaining branches pick the same token, so the margin cannot change the choice here.
    """
    del margin_seconds  # only decides when a LONG run switches tokens; no LONG here
    if check is not None:
        # "while it still verifies": verification (exp with its clock-skew leeway included) is
        # the whole test; a second exp check of our own would refuse a token the seed uses.
        check(token.reveal())
        return token
    # No verifier (never in the service): the stored expiry is the only test left.
    current = now or datetime.now(UTC)
    if expires_at is not None and expires_at <= current:
        raise AuthenticationError("the run credential has expired")
    return token
