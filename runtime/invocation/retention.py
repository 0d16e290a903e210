"""The retention sweep: expired idempotency reservations, old finished runs, old start counts."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.invocation import store
from runtime.store import Database


@dataclass(frozen=True)
class RetentionReport:
    """What one sweep removed."""

    reservations: int
    runs: int
    start_counts: int = 0


async def sweep_retention(db: Database, *, retention_s: float, batch: int) -> RetentionReport:
    """One bounded sweep in its own transaction (a live run and its reservation always stay)."""
    async with db.transaction() as conn:
        reservations, runs = await store.sweep_retention(conn, retention_s, batch)
        start_counts = await store.sweep_start_counts(conn, batch)
    return RetentionReport(reservations, runs, start_counts)
