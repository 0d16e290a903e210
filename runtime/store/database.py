"""The connection pool and the transaction boundary every service function goes through."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Literal

from psycopg import AsyncConnection, IsolationLevel, sql
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from runtime.store.errors import wrap_errors

Connection = AsyncConnection[DictRow]
Isolation = Literal["read committed", "repeatable read", "serializable"]

_ISOLATION_LEVELS: dict[str, IsolationLevel] = {
    "read committed": IsolationLevel.READ_COMMITTED,
    "repeatable read": IsolationLevel.REPEATABLE_READ,
    "serializable": IsolationLevel.SERIALIZABLE,
}


class Database:
    """A psycopg AsyncConnectionPool of dict-row connections, optionally as the runtime role.

    Pooled connections are in autocommit mode between uses; ``transaction()`` opens exactly one
    transaction and commits it on a clean exit, so store helpers never commit themselves.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        runtime_role: str | None = "workflow_runtime",
        min_size: int = 2,
        max_size: int = 16,
        name: str = "workflow",
        timeout_s: float = 30.0,
    ) -> None:
        self.runtime_role = runtime_role
        self._pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            conninfo,
            connection_class=AsyncConnection[DictRow],
            kwargs={"autocommit": True, "row_factory": dict_row},
            min_size=min_size,
            max_size=max_size,
            open=False,
            configure=self._configure,
            reset=self._reset,
            name=name,
            timeout=timeout_s,
            # A connection the server dropped (restart, failover, idle kill) is replaced before
            # use instead of failing the request that happens to draw it.
            check=AsyncConnectionPool.check_connection,
        )

    @property
    def pool(self) -> AsyncConnectionPool[Connection]:
        """The underlying pool (for stats and advanced use)."""
        return self._pool

    async def open(self, *, wait: bool = True, timeout_s: float = 30.0) -> None:
        """Open the pool; with wait, until min_size connections are ready."""
        with wrap_errors():
            await self._pool.open(wait=wait, timeout=timeout_s)

    async def close(self) -> None:
        """Close the pool and all its connections."""
        await self._pool.close()

    async def __aenter__(self) -> Database:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @asynccontextmanager
    async def transaction(
        self, *, read_only: bool = False, isolation: Isolation | None = None
    ) -> AsyncIterator[Connection]:
        """Yield a connection inside one transaction; commit on success, roll back on error."""
        with wrap_errors():
            async with self._pool.connection() as conn:
                if isolation is not None:
                    await conn.set_isolation_level(_ISOLATION_LEVELS[isolation])
                if read_only:
                    await conn.set_read_only(True)
                async with conn.transaction():
                    yield conn

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """Yield an autocommit connection (LISTEN/NOTIFY, statements that manage their own
        transactions)."""
        with wrap_errors():
            async with self._pool.connection() as conn:
                yield conn

    async def _configure(self, conn: Connection) -> None:
        """Runs once per new connection: switch to the runtime role when one is configured."""
        if self.runtime_role:
            await conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(self.runtime_role)))

    @staticmethod
    async def _reset(conn: Connection) -> None:
        """Runs when a connection comes back: undo per-transaction options (client-side only)."""
        if not conn.autocommit:
            await conn.set_autocommit(True)
        if conn.isolation_level is not None:
            await conn.set_isolation_level(None)
        if conn.read_only is not None:
            await conn.set_read_only(None)
