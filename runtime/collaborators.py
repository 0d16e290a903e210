"""The long-lived collaborators a request needs, built once per process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runtime.addresses import Resolver, SystemResolver
from runtime.admission import Admission
from runtime.store.migrations import (
    DEFAULT_DIRECTORY,
    applied_migrations,
    discover_functions,
    discover_migrations,
    installed_functions,
)

if TYPE_CHECKING:
    from runtime.security import Authenticator, Keyring
    from runtime.settings import Settings
    from runtime.store import Database


@dataclass
class Services:
    """Settings, the database, the authenticator, the sealing keyring and admission."""

    settings: Settings
    database: Database
    authenticator: Authenticator
    keyring: Keyring
    # Set by the in-process executor job: readiness then also reports whether it runs.
    executor_alive: Callable[[], bool] | None = None
    # Resolves outbound host names for the destination policy (a test drives its own).
    resolver: Resolver = field(default_factory=SystemResolver)
    # This process's admission (front door, capacity controller, batches): `serve` builds it
    # before the app, since the HTTP server's front door uses it too (runtime.admission.state).
    admission: Admission = field(default_factory=Admission)

    async def readiness(self) -> dict[str, bool]:
        """Database reachable, every migration applied, a usable sealing key loaded.

        Every function file must have been installed, at this release's text or another's
        (a rolling upgrade's newer release may have installed its own since).
        """
        database_ok = migrations_ok = False
        try:
            async with self.database.connection() as conn:
                await conn.execute("SELECT 1")
                database_ok = True
                applied = {row.version for row in await applied_migrations(conn)}
                expected = {file.version for file in discover_migrations(DEFAULT_DIRECTORY)}
                installed = set(await installed_functions(conn))
                authored = {file.name for file in discover_functions(DEFAULT_DIRECTORY)}
                migrations_ok = expected <= applied and authored <= installed
        except Exception:
            # Readiness reports, it does not raise: a broken store is "not ready".
            pass
        checks = {
            "database": database_ok,
            "migrations": migrations_ok,
            "keyring": self.keyring.has_usable_key,
        }
        if self.executor_alive is not None:
            checks["executor"] = self.executor_alive()
        return checks
