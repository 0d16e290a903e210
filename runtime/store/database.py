"""The connection pool and the transaction boundary every service function goes through."""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Generic, Literal, TypeVar

from psycopg import AsyncConnection, AsyncTransaction, IsolationLevel, sql
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from runtime.store.errors import is_connection_error, wrap_errors

T = TypeVar("T")

Connection = AsyncConnection[DictRow]
Isolation = Literal["read committed", "repeatable read", "serializable"]

# Statements are prepared server-side on their second use on a connection (the first use in
# autocommit would cost an extra implicit transaction); the cache holds every named query.
PREPARE_THRESHOLD = 1
PREPARED_MAX = 512
# Idle connections are closed by the pool's own scheduler after this long, so a connection a
# server or network dropped long ago is rarely drawn; one dropped since is caught at BEGIN.
MAX_IDLE_S = 300.0

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
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "prepare_threshold": PREPARE_THRESHOLD,
            },
            min_size=min_size,
            max_size=max_size,
            open=False,
            configure=self._configure,
            reset=self._reset,
            name=name,
            timeout=timeout_s,
            max_idle=MAX_IDLE_S,
        )
        self._close_hooks: list[Callable[[], Awaitable[None]]] = []

    @property
    def pool(self) -> AsyncConnectionPool[Connection]:
        """The underlying pool (for stats and advanced use)."""
        return self._pool

    async def open(self, *, wait: bool = True, timeout_s: float = 30.0) -> None:
        """Open the pool; with wait, until min_size connections are ready."""
        with wrap_errors():
            await self._pool.open(wait=wait, timeout=timeout_s)

    def on_close(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run hook when the database closes, before the pool (connections of its own it owns).

        Why: what opens its own connections for this database (the result waiter's LISTEN
        connections) must not outlive it. Left open, a listener reconnects for ever to a
        database that is gone, a task nobody stops.
        """
        self._close_hooks.append(hook)

    async def close(self) -> None:
        """Run the close hooks (newest first), then close the pool and all its connections."""
        hooks, self._close_hooks = self._close_hooks[::-1], []
        try:
            for hook in hooks:
                await hook()
        finally:
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
        """Yield a connection inside one transaction; commit on success, roll back on error.

        No round trip checks a connection on checkout: a connection the server dropped
        (restart, failover, idle kill) fails at BEGIN, before the body ran, so the pool's idle
        connections are checked then and the transaction starts once more on a live one.
        """
        with wrap_errors():
            conn, transaction = await self._begin(read_only, isolation)
            try:
                try:
                    yield conn
                except BaseException as exc:
                    if not await transaction.__aexit__(type(exc), exc, exc.__traceback__):
                        raise
                else:
                    await transaction.__aexit__(None, None, None)
            finally:
                await self._pool.putconn(conn)

    async def _begin(
        self, read_only: bool, isolation: Isolation | None
    ) -> tuple[Connection, AbstractAsyncContextManager[AsyncTransaction]]:
        for attempt in (1, 2):
            conn = await self._pool.getconn()
            try:
                if isolation is not None:
                    await conn.set_isolation_level(_ISOLATION_LEVELS[isolation])
                if read_only:
                    await conn.set_read_only(True)
                transaction = conn.transaction()
                await transaction.__aenter__()
            except BaseException as exc:
                # Back to the pool on any failure, cancellation included (a broken or busy
                # connection is discarded there, not reused).
                await self._pool.putconn(conn)
                if attempt == 2 or not is_connection_error(exc):
                    raise
                await self._pool.check()
                continue
            return conn, transaction
        raise AssertionError("unreachable")  # pragma: no cover

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """Yield an autocommit connection (LISTEN/NOTIFY, statements that manage their own
        transactions)."""
        with wrap_errors():
            async with self._pool.connection() as conn:
                yield conn

    async def _configure(self, conn: Connection) -> None:
        """Runs once per new connection: switch to the runtime role when one is configured."""
        conn.prepared_max = PREPARED_MAX
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


class PerDatabase(Generic[T]):
    """One T per Database, made on first use and forgotten with the database."""

    def __init__(self, make: Callable[[Database], T]) -> None:
        self._make = make
        self._made: weakref.WeakKeyDictionary[Database, T] = weakref.WeakKeyDictionary()

    def __call__(self, db: Database) -> T:
        """The database's T (made now when it has none yet)."""
        made = self._made.get(db)
        if made is None:
            made = self._made[db] = self._make(db)
        return made
