"""Driver errors become typed errors here, and only here.

Constraints get explicit names (kept as constants by the domain that owns them); a domain
registers, once at import time, how a violation of each named constraint reads as a
WorkflowError. ``wrap_errors()`` applies the registry and turns connection-class failures
into ``StoreUnavailable``; anything else propagates unchanged.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg
import psycopg_pool

from runtime.errors import WorkflowError

T = TypeVar("T")
ConstraintErrorFactory = Callable[[psycopg.Error], WorkflowError]

_CONSTRAINT_ERRORS: dict[str, ConstraintErrorFactory] = {}
# Server-side SQLSTATEs that mean "the server went away or is not accepting us right now".
_CONNECTION_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})


class StoreUnavailable(WorkflowError):
    """The database could not be reached or dropped the connection; retrying may succeed."""

    def __init__(self, message: str = "the workflow database is unavailable") -> None:
        super().__init__("WORKFLOW_INVOCATION_UNAVAILABLE", message, status="failed")


def register_constraint_error(constraint_name: str, factory: ConstraintErrorFactory) -> None:
    """Map violations of the named constraint to the WorkflowError factory returns."""
    existing = _CONSTRAINT_ERRORS.get(constraint_name)
    if existing is not None and existing is not factory:
        raise ValueError(f"constraint {constraint_name!r} already has an error mapping")
    _CONSTRAINT_ERRORS[constraint_name] = factory


def is_connection_error(exc: BaseException) -> bool:
    """Whether exc means the connection failed rather than the statement being refused."""
    if isinstance(exc, StoreUnavailable | psycopg_pool.PoolTimeout):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    sqlstate = exc.sqlstate
    if sqlstate is None:
        # Client-side: no server verdict, so the link itself failed (or the pool is closed).
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return sqlstate.startswith("08") or sqlstate in _CONNECTION_SQLSTATES


def translate_error(exc: psycopg.Error) -> BaseException:
    """The typed error for exc, or exc itself when nothing maps it."""
    constraint = exc.diag.constraint_name
    if constraint is not None and (factory := _CONSTRAINT_ERRORS.get(constraint)) is not None:
        return factory(exc)
    if is_connection_error(exc):
        return StoreUnavailable()
    if isinstance(exc, _UNSTORABLE_TEXT):
        # Input validation refuses these first; this is the backstop for any path it missed.
        return WorkflowError(
            "WORKFLOW_INPUT_INVALID",
            "text contains a character the store cannot hold (U+0000 or an invalid code point)",
        )
    if isinstance(exc, psycopg.errors.StringDataRightTruncation):
        # Permanent: the same value fails every retry, so it is never "unavailable".
        return WorkflowError(
            "WORKFLOW_INPUT_INVALID", "a value is longer than the workflow store holds"
        )
    return exc


_UNSTORABLE_TEXT = (
    psycopg.errors.UntranslatableCharacter,
    psycopg.errors.CharacterNotInRepertoire,
)


@contextmanager
def wrap_errors() -> Iterator[None]:
    """Translate psycopg errors raised in the block into WorkflowError / StoreUnavailable."""
    try:
        yield
    except psycopg.Error as exc:
        translated = translate_error(exc)
        if translated is exc:
            raise
        raise translated from exc


async def retry_on_connection_error(
    operation: Callable[[], Awaitable[T]],
    *,
    attempts: int = 3,
    base_delay_s: float = 0.05,
    max_delay_s: float = 1.0,
) -> T:
    """Await operation(), retrying connection-class failures with full-jitter backoff.

    Only for idempotent work: a connection lost during COMMIT may have committed.
    """
    for attempt in range(1, attempts + 1):
        try:
            return await operation()
        except Exception as exc:
            if attempt == attempts or not is_connection_error(exc):
                raise
            ceiling = min(max_delay_s, base_delay_s * 2 ** (attempt - 1))
            await asyncio.sleep(random.uniform(0, ceiling))
    raise AssertionError("unreachable")  # pragma: no cover
