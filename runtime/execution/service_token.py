"""Workflow's own application token for nested MCP calls (X-Scope-Token), renewed in time.

An OAuth 2.0 client-credentials grant (RFC 6749 section 4.4) at the configured token endpoint.
The token is kept in memory, used until `renew_fraction` of its lifetime has passed, then
renewed by the next call that needs it; while a renewal fails the current token stays in use
until its own expiry, and a call never carries a token past it. Concurrent callers share one
grant (single flight per event loop), so a burst of nested calls at renewal time costs the
endpoint one request. Neither the token nor the client secret is ever logged or put in an
error message: both live in SecretToken and are revealed only into the request.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

import httpx
import jwt

from runtime.execution.settings import ServiceTokenSettings
from runtime.security import SecretToken

log = logging.getLogger("workflow.execution.service_token")

GRANT_TYPE = "client_credentials"
# Bounds what a misbehaving endpoint can make the runtime parse.
MAX_RESPONSE_BYTES = 65_536
# A token whose lifetime the endpoint does not say (no expires_in, no JWT exp) is renewed as
# if it lived this long; a 401 from the Gateway renews it sooner.
UNKNOWN_LIFETIME_S = 300.0
# While a renewal fails and the held token is still valid, it is tried again this much later.
RENEW_RETRY_S = 5.0
# An expires_in beyond this is taken as this: a renewal a day keeps a rotated key in reach.
MAX_LIFETIME_S = 86_400.0


class ServiceTokenError(Exception):
    """No usable service token: the grant failed and no unexpired token is held."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ClientSecret(Protocol):
    """Where the client secret comes from (read at every grant, so it may rotate).

    Asynchronous so that a source reading a store (a database, a vault) fits as well as a file.
    """

    async def read(self) -> SecretToken:
        """The current secret; ServiceTokenError when it cannot be read."""
        ...


@dataclass(frozen=True)
class SecretFile:
    """A client secret held in a file (one line; surrounding white space is ignored)."""

    path: Path

    async def read(self) -> SecretToken:
        """The file's secret, read now (a few bytes: no need to leave the loop)."""
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ServiceTokenError(
                f"the client secret file cannot be read ({type(exc).__name__})"
            ) from None
        if not text:
            raise ServiceTokenError("the client secret file is empty")
        return SecretToken(text)


# Opens a host's secret by (host id, name): None when the host holds no such secret.
SecretOpener = Callable[[str, str], Awaitable[SecretToken | None]]


@dataclass(frozen=True)
class StoredSecret:
    """A client secret held in a host's secret store (read at every grant: rotation applies)."""

    host_id: str
    name: str
    open: SecretOpener

    async def read(self) -> SecretToken:
        """The secret's current value; ServiceTokenError when the store cannot give it."""
        try:
            value = await self.open(self.host_id, self.name)
        except Exception as exc:
            # Only the type: a store error's message could carry connection details.
            raise ServiceTokenError(
                f"the client secret {self.name} cannot be read ({type(exc).__name__})"
            ) from None
        if value is None:
            raise ServiceTokenError(
                f"the client secret {self.name} is not in the secret store of its host"
            )
        return value


@dataclass(frozen=True)
class _Held:
    token: SecretToken
    renew_at: float  # on the source's monotonic clock
    expires_at: float


class ServiceTokens:
    """The client side of one token endpoint: the cached token, its renewal, single flight."""

    def __init__(
        self,
        settings: ServiceTokenSettings,
        secret: ClientSecret,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if settings.endpoint is None or settings.client_id is None:
            raise ValueError("service tokens need a configured endpoint and client_id")
        self._settings = settings
        self._endpoint = settings.endpoint
        self._client_id = settings.client_id
        self._secret = secret
        self._transport = transport
        self._clock = clock
        self._held: _Held | None = None
        # One grant in flight per event loop (a task cannot be awaited from another loop).
        self._flights: dict[int, asyncio.Task[SecretToken]] = {}

    @classmethod
    def from_settings(
        cls,
        settings: ServiceTokenSettings,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        open_secret: SecretOpener | None = None,
    ) -> ServiceTokens | None:
        """The source of the settings, or None when no token endpoint is configured.

        open_secret reads the host secret store; it is needed when the client secret is kept
        there (client_secret_name) and a process without the store refuses such settings.
        """
        if not settings.configured:
            return None
        if settings.client_secret_file is not None:
            secret: ClientSecret = SecretFile(Path(settings.client_secret_file))
        elif settings.client_secret_name is not None and settings.client_secret_host is not None:
            if open_secret is None:
                raise ValueError("service_token.client_secret_name needs the secret store")
            secret = StoredSecret(
                settings.client_secret_host, settings.client_secret_name, open_secret
            )
        else:
            return None
        return cls(settings, secret, transport=transport)

    async def token(self) -> SecretToken:
        """A token to send now: the held one until its renewal is due, else a renewed one."""
        held = self._held
        now = self._clock()
        if held is not None and now < held.renew_at:
            return held.token
        if held is not None and now < held.expires_at:
            try:
                return await self._renewed()
            except ServiceTokenError as exc:
                # Renewal is early on purpose: the held token still works, so keep using it,
                # and ask again a little later rather than on every call meanwhile.
                log.warning("the service token was not renewed (kept until expiry): %s", exc)
                if self._held is held:
                    later = min(self._clock() + RENEW_RETRY_S, held.expires_at)
                    self._held = dataclasses.replace(held, renew_at=later)
                return held.token
        return await self._renewed()

    async def refresh(self, rejected: SecretToken) -> SecretToken | None:
        """After the Gateway refused `rejected` (401): a newer token, or None when none differs.

        When another caller already replaced the rejected token, that newer one is the answer
        and no grant is made; otherwise one grant (shared with concurrent refreshes).
        """
        held = self._held
        if held is not None and held.token.reveal() != rejected.reveal():
            return await self.token()  # already replaced: that one, renewed when due
        renewed = await self._renewed()
        return None if renewed.reveal() == rejected.reveal() else renewed

    async def _renewed(self) -> SecretToken:
        loop = asyncio.get_running_loop()
        flight = self._flights.get(id(loop))
        if flight is None:
            flight = loop.create_task(self._grant(), name="service-token-grant")
            self._flights[id(loop)] = flight
            flight.add_done_callback(lambda done: self._landed(id(loop), done))
        # A caller that is cancelled leaves the grant running for the others.
        return await asyncio.shield(flight)

    def _landed(self, loop_id: int, flight: asyncio.Task[SecretToken]) -> None:
        if self._flights.get(loop_id) is flight:
            del self._flights[loop_id]
        if not flight.cancelled():
            flight.exception()  # retrieved: every caller may have been cancelled meanwhile

    async def _grant(self) -> SecretToken:
        started = self._clock()
        form = {"grant_type": GRANT_TYPE}
        if self._settings.scope is not None:
            form["scope"] = self._settings.scope
        if self._settings.audience is not None:
            form["audience"] = self._settings.audience
        secret = await self._secret.read()
        headers = {"accept": "application/json"}
        if self._settings.client_auth == "client_secret_basic":
            # RFC 6749 2.3.1: the id and secret are form-urlencoded before Basic encoding.
            pair = f"{quote(self._client_id, safe='')}:{quote(secret.reveal(), safe='')}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        else:
            form |= {"client_id": self._client_id, "client_secret": secret.reveal()}
        try:
            async with httpx.AsyncClient(
                transport=self._transport,
                timeout=self._settings.timeout_seconds,
                follow_redirects=False,
                trust_env=False,
            ) as client:
                response = await client.post(self._endpoint, data=form, headers=headers)
        except httpx.HTTPError as exc:
            raise ServiceTokenError(f"the token endpoint failed: {type(exc).__name__}") from None
        token, lifetime = _issued(response)
        lifetime = min(lifetime if lifetime is not None else UNKNOWN_LIFETIME_S, MAX_LIFETIME_S)
        # Measured from the request's start: the token may have been issued just after it.
        self._held = _Held(
            token=token,
            renew_at=started + lifetime * self._settings.renew_fraction,
            expires_at=started + lifetime,
        )
        return token


def _issued(response: httpx.Response) -> tuple[SecretToken, float | None]:
    """The token of a grant response and its lifetime in seconds (None: not said)."""
    if response.status_code != 200:
        status = response.status_code
        raise ServiceTokenError(f"the token endpoint refused the grant: HTTP {status}")
    if len(response.content) > MAX_RESPONSE_BYTES:
        raise ServiceTokenError("the token endpoint answered too much")
    try:
        body = response.json()
    except ValueError:
        raise ServiceTokenError("the token endpoint answered no JSON") from None
    if not isinstance(body, dict):
        raise ServiceTokenError("the token endpoint answered no JSON object")
    token, token_type = body.get("access_token"), body.get("token_type")
    if not isinstance(token, str) or not token:
        raise ServiceTokenError("the token endpoint answered no access_token")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise ServiceTokenError("the token endpoint answered a token that is not a bearer")
    expires_in = body.get("expires_in")
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float | None):
        raise ServiceTokenError("the token endpoint answered a malformed expires_in")
    if expires_in is not None and expires_in <= 0:
        raise ServiceTokenError("the token endpoint answered a token that has expired")
    # A JWT's own exp is what the Gateway checks: a token is never held past it, even when
    # expires_in says longer (it counts from issue, in whole seconds).
    lifetimes = [float(expires_in)] if expires_in is not None else []
    lifetimes += [] if (remaining := _jwt_lifetime(token)) is None else [remaining]
    return SecretToken(token), min(lifetimes, default=None)


def _jwt_lifetime(token: str) -> float | None:
    """Seconds until a JWT's exp, read unverified (only to schedule the renewal)."""
    try:
        exp = jwt.decode(token, options={"verify_signature": False}).get("exp")
    except jwt.PyJWTError:
        return None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    remaining = float(exp) - time.time()
    if remaining <= 0:
        raise ServiceTokenError("the token endpoint answered a token that has expired")
    return remaining
