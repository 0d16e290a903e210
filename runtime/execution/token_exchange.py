"""RFC 8693 Token Exchange: a workflow_start run trades its user token before it expires."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import httpx

from runtime.errors import AuthenticationError
from runtime.execution import store
from runtime.execution.credential import seal_credential, token_expiry
from runtime.execution.store import StoredCredential
from runtime.security import Keyring, SecretToken, TokenExchangeSettings
from runtime.store import Database

log = logging.getLogger("workflow.execution.token_exchange")

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
# Bounds what a misbehaving endpoint can make the runtime parse.
MAX_RESPONSE_BYTES = 65_536


@dataclass(frozen=True)
class TokenExchanger:
    """The client side of one configured token exchange endpoint."""

    endpoint: str
    client_id: str
    client_secret: SecretToken
    audience: str | None
    timeout_s: float
    transport: httpx.AsyncBaseTransport | None = None

    @classmethod
    def from_settings(
        cls, settings: TokenExchangeSettings, transport: httpx.AsyncBaseTransport | None = None
    ) -> TokenExchanger | None:
        """The exchanger of the settings, or None when no endpoint is configured."""
        if settings.endpoint is None or not settings.client_id or not settings.client_secret:
            return None
        return cls(
            endpoint=settings.endpoint,
            client_id=settings.client_id,
            client_secret=SecretToken(settings.client_secret),
            audience=settings.audience,
            timeout_s=settings.timeout_seconds,
            transport=transport,
        )

    async def exchange(self, subject: SecretToken) -> SecretToken:
        """The subject token traded for a new one; AuthenticationError on any failure."""
        form = {
            "grant_type": GRANT_TYPE,
            "subject_token": subject.reveal(),
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
        }
        if self.audience is not None:
            form["audience"] = self.audience
        # RFC 6749 2.3.1: the id and secret are form-urlencoded before Basic encoding.
        auth = httpx.BasicAuth(
            quote(self.client_id, safe=""), quote(self.client_secret.reveal(), safe="")
        )
        try:
            async with httpx.AsyncClient(
                transport=self.transport, timeout=self.timeout_s, follow_redirects=False
            ) as client:
                response = await client.post(self.endpoint, data=form, auth=auth)
        except httpx.HTTPError as exc:
            raise AuthenticationError(f"token exchange failed: {type(exc).__name__}") from None
        return _issued_token(response)


def _issued_token(response: httpx.Response) -> SecretToken:
    if response.status_code != 200:
        raise AuthenticationError(f"token exchange refused: HTTP {response.status_code}")
    if len(response.content) > MAX_RESPONSE_BYTES:
        raise AuthenticationError("token exchange answered too much")
    try:
        body = response.json()
    except ValueError:
        raise AuthenticationError("token exchange answered no JSON") from None
    token = body.get("access_token") if isinstance(body, dict) else None
    token_type = body.get("token_type") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token:
        raise AuthenticationError("token exchange answered no access_token")
    if not isinstance(token_type, str) or token_type.lower() not in ("bearer", "n_a"):
        raise AuthenticationError("token exchange answered a token that is not a bearer")
    return SecretToken(token)


async def renew_near_expiry(
    db: Database,
    keyring: Keyring,
    exchanger: TokenExchanger,
    where: tuple[str, str],
    stored: StoredCredential,
    token: SecretToken,
    margin_seconds: int,
) -> tuple[SecretToken, datetime | None, bool]:
    """Seed 000 "Run credential selection" step 2: within the margin, the exchanged token.

    The new token is sealed (AES-GCM, bound to the run) and stored with the mark that it was
    exchanged, so every replica and every later call uses it and routes the run's protected
    HTTP calls to the Gateway; the store keeps the later-expiring token when two tasks race.
    When the exchange fails, the current token stays in use while it still verifies (step 3).
    Returns the token, its expiry, and whether it is an exchanged one.
    """
    expires_at = stored.token_expires_ts
    now = datetime.now(UTC)
    if expires_at is not None and expires_at - now > timedelta(seconds=margin_seconds):
        return token, expires_at, stored.exchanged
    host_id, process_id = where
    try:
        exchanged = await exchanger.exchange(token)
    except AuthenticationError as exc:
        log.warning("run %s keeps its current token: %s", process_id, exc.message)
        return token, expires_at, stored.exchanged
    new_expiry = token_expiry(exchanged)
    sealed = seal_credential(keyring, exchanged, host_id, process_id)
    async with db.transaction() as conn:
        await store.replace_credential(conn, host_id, process_id, sealed, new_expiry)
    return exchanged, new_expiry, True
