"""Assemble the running service: settings, store, identity, keyring."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from litestar import asgi
from litestar.handlers import ASGIRouteHandler
from litestar.types import Receive, Scope, Send

from runtime.admission import Admission
from runtime.collaborators import Services
from runtime.engine.cel import prepare_parser
from runtime.execution import ServiceTokenSettings, close_waiter, configure_waiter
from runtime.security import (
    Authenticator,
    KeySet,
    TokenExchangeSettings,
    load_configured_keyring,
)
from runtime.security.dev_client_credentials import DEV_SERVICE_CLIENT_ID
from runtime.security.dev_token_exchange import DEV_EXCHANGE_CLIENT_ID
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from runtime.store.bootstrap import open_store

DEV_TOKEN_EXCHANGE_PATH = "/dev/token-exchange"
DEV_CLIENT_CREDENTIALS_PATH = "/dev/client-credentials"


def apply_dev_identity(settings: Settings) -> DevIdentity | None:
    """With no trusted keys configured, trust a development key pair under the data dir.

    workflow_start runs then exchange their tokens at the dev identity's own RFC 8693 endpoint,
    and nested MCP calls carry Workflow's own token from its client-credentials endpoint, both
    served by `workflow-mcp serve` (dev_token_routes), unless others are configured.
    """
    security = settings.security
    if security.jwks_file or security.public_key_files:
        return None
    identity = DevIdentity(Path(settings.store.data_dir) / "dev")
    settings.security = identity.settings(run_credential=security.run_credential)
    host = settings.server.host if settings.server.host not in ("0.0.0.0", "::") else "127.0.0.1"
    origin = f"http://{host}:{settings.server.port}"
    if not security.run_credential.token_exchange.configured:
        settings.security.run_credential.token_exchange = TokenExchangeSettings(
            endpoint=f"{origin}{DEV_TOKEN_EXCHANGE_PATH}",
            client_id=DEV_EXCHANGE_CLIENT_ID,
            client_secret=identity.exchange_secret(),
        )
    outbound = settings.execution.outbound
    if not outbound.service_token.configured:
        outbound.service_token = ServiceTokenSettings(
            endpoint=f"{origin}{DEV_CLIENT_CREDENTIALS_PATH}",
            client_id=DEV_SERVICE_CLIENT_ID,
            client_secret_file=str(identity.service_secret_file()),
        )
    return identity


def dev_token_routes(identity: DevIdentity) -> list[ASGIRouteHandler]:
    """The dev identity's token endpoints: RFC 8693 exchange and client credentials."""
    exchange = identity.token_exchange(identity.exchange_secret())
    secret = identity.service_secret_file().read_text("ascii").strip()
    client_credentials = identity.client_credentials(secret)

    @asgi(DEV_TOKEN_EXCHANGE_PATH, is_mount=True)
    async def token_exchange(scope: Scope, receive: Receive, send: Send) -> None:
        await exchange(dict(scope), receive, send)  # type: ignore[arg-type]

    @asgi(DEV_CLIENT_CREDENTIALS_PATH, is_mount=True)
    async def service_token(scope: Scope, receive: Receive, send: Send) -> None:
        await client_credentials(dict(scope), receive, send)  # type: ignore[arg-type]

    return [token_exchange, service_token]


async def build_services(
    settings: Settings, admission: Admission | None = None
) -> tuple[Services, Callable[[], Awaitable[None]]]:
    """Open the store (starting and migrating an embedded cluster when needed) and wire services.

    admission: the process's admission when its HTTP server's front door already uses it.
    """
    # Built here, off the event loop, not by the first call that evaluates an expression.
    await asyncio.to_thread(prepare_parser)
    store = await open_store(settings.store)
    configure_waiter(
        store.database, listener_connections=settings.execution.wait_listener_connections
    )
    keyset = KeySet.from_settings(settings.security)
    services = Services(
        settings=settings,
        database=store.database,
        authenticator=Authenticator(settings.security, keyset),
        keyring=load_configured_keyring(settings.security),
        admission=admission or Admission(settings.capacity),
    )

    async def close() -> None:
        # The LISTEN connection goes first: stopping the cluster under it is no lost connection.
        await close_waiter(store.database)
        # A cluster this process started stops with it; a reused one keeps running.
        await store.close(stop_embedded=True)

    return services, close
