"""The retention sweep: expired idempotency reservations and old finished runs."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.invocation import store
from runtime.store import Database


@dataclass(frozen=True)
class RetentionReport:
    """What one sweep removed."""

    reservations: int
    runs: int


async def sweep_retention(db: Database, *, retention_s: float, batch: int) -> RetentionReport:
    """One bounded sweep in its own transaction (a live run and its reservation always stay)."""
    async with db.transaction() as conn:
        reservations, runs = await store.sweep_retention(conn, retention_s, batch)
    return RetentionReport(reservations, runs)
