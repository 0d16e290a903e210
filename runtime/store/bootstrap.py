"""Service start-up for the store: find or start PostgreSQL, migrate, open the pool."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from runtime.store.database import Database
from runtime.store.embedded import EmbeddedPostgres
from runtime.store.migrations import DEFAULT_DIRECTORY, migrate
from runtime.store.settings import StoreSettings


@dataclass
class Store:
    """The opened store of a running service."""

    database: Database
    conninfo: str
    embedded: EmbeddedPostgres | None

    async def close(self, *, stop_embedded: bool = True) -> None:
        """Close the pool and stop the embedded cluster if this process started it."""
        await self.database.close()
        if stop_embedded and self.embedded is not None and not self.embedded.reused:
            await asyncio.to_thread(self.embedded.stop)


async def resolve_conninfo(settings: StoreSettings) -> tuple[str, EmbeddedPostgres | None]:
    """settings.database_url, or the URL of the embedded cluster under <data_dir>/pg."""
    if settings.database_url:
        return settings.database_url, None
    embedded = EmbeddedPostgres(Path(settings.data_dir) / "pg")
    url = await asyncio.to_thread(embedded.start)
    return url, embedded


async def open_store(
    settings: StoreSettings,
    *,
    run_migrations: bool = True,
    migrations_dir: str | os.PathLike[str] = DEFAULT_DIRECTORY,
) -> Store:
    """Reach PostgreSQL, apply pending migrations, and open the runtime-role pool."""
    conninfo, embedded = await resolve_conninfo(settings)
    database = Database(
        conninfo,
        runtime_role=settings.runtime_role,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        timeout_s=settings.pool_timeout_s,
    )
    try:
        if run_migrations:
            await migrate(conninfo, migrations_dir)
        await database.open()
    except BaseException:
        # Leave the machine as we found it: a cluster we started does not outlive a failed start.
        if embedded is not None and not embedded.reused:
            await asyncio.to_thread(embedded.stop)
        raise
    return Store(database=database, conninfo=conninfo, embedded=embedded)
