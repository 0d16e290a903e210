"""Assemble the running service: settings, store, identity, keyring."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from runtime.execution import configure_waiter
from runtime.security import Authenticator, KeySet, load_configured_keyring
from runtime.security.devtools import DevIdentity
from runtime.services import Services
from runtime.settings import Settings
from runtime.store.bootstrap import open_store


def apply_dev_identity(settings: Settings) -> DevIdentity | None:
    """With no trusted keys configured, trust a development key pair under the data dir."""
    security = settings.security
    if security.jwks_file or security.public_key_files:
        return None
    identity = DevIdentity(Path(settings.store.data_dir) / "dev")
    settings.security = identity.settings()
    return identity


async def build_services(
    settings: Settings,
) -> tuple[Services, Callable[[], Awaitable[None]]]:
    """Open the store (starting and migrating an embedded cluster when needed) and wire services."""
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
    )

    async def close() -> None:
        # A cluster this process started stops with it; a reused one keeps running.
        await store.close(stop_embedded=True)

    return services, close
