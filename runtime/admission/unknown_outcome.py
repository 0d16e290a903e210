"""An admission whose commit outcome is unknown says so, and names the key that re-attaches.

A connection that drops after the admission statement was sent (its COMMIT among it) leaves
the outcome unknown: the run may be admitted and running. Retried on a new connection, the
same call attaches to it (same process id, same idempotency scope); but when the database is
still away, the retry fails as well and the caller must not read "unavailable, nothing
happened" (issue 42 item 7: a call answered "database unavailable" in 66 ms was in fact
admitted, and its run POSTed 1.3 s later). Only a call that never got a connection (the pool
timed out waiting for one) knows that nothing was sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg_pool

from runtime.errors import WorkflowError
from runtime.store import is_connection_error, retry_on_connection_error

T = TypeVar("T")
UnknownError = Callable[[], WorkflowError]


def may_have_sent(exc: BaseException) -> bool:
    """Whether a connection failure may have come after the statement left (not a pool wait)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, psycopg_pool.PoolTimeout):
            return False
        seen = seen.__cause__ or seen.__context__
    return True


async def admit_or_unknown(admit: Callable[[], Awaitable[T]], unknown: UnknownError) -> T:
    """admit(), tried once more on a dropped connection; unknown() when both tries failed
    and either may have committed."""
    sent = False

    async def attempt() -> T:
        nonlocal sent
        try:
            return await admit()
        except Exception as exc:
            if is_connection_error(exc) and may_have_sent(exc):
                sent = True
            raise

    try:
        return await retry_on_connection_error(attempt, attempts=2)
    except Exception as exc:
        if sent and is_connection_error(exc):
            raise unknown() from exc
        raise


def unknown_admission(
    process_id: str, key: str | None, *, derived: bool, generated: bool, may_write: bool
) -> WorkflowError:
    """WORKFLOW_INVOCATION_UNAVAILABLE for an admission whose commit outcome is unknown.

    Retryable, because the retry it names is safe: the same key re-attaches to the run if
    it was admitted and admits it once if it was not. afterEffect when the run would write:
    it may be running, so a retry under a new key could write twice.
    """
    if derived:
        how = "call again with the same input (this Tool derives its idempotency key from it)"
    elif generated:
        # Seed 000: "If neither is supplied, each Start request generates a fresh key and
        # represents new work, even with identical workflow input. A caller retrying one
        # intended start must reuse an explicit key." The fresh key is that explicit key.
        how = (
            f"this call had no idempotencyKey, so it was given the fresh key {key}: call again"
            " with idempotencyKey set to it (a call without a key is new work)"
        )
    else:
        how = f"call again with the same idempotencyKey {key}"
    details: dict[str, object] = {"admission": "unknown", "workflowInstanceId": process_id}
    if key is not None and not derived:
        details["idempotencyKey"] = key
    return WorkflowError(
        "WORKFLOW_INVOCATION_UNAVAILABLE",
        "the database connection dropped while the admission was committing, so whether a run"
        f" was admitted is unknown (if it was, its instance id is {process_id}); {how} to"
        " re-attach to it, or workflow_get_status that id once the database is back",
        retryable=True,
        after_effect=may_write,
        details=details,
    )
