"""Planner statistics of the young run tables, refreshed faster than autovacuum looks.

A connection keeps its plan of each statement of our PL/pgSQL functions until the statistics
of the tables it reads change. Plans made in the first seconds of a fresh install, while the
tables hold a handful of rows, may pick an index that reads every row of the host instead of
the primary key, and autovacuum re-analyzes only once a minute and after a tenth of the table
changed: under load that is tens of thousands of lookups at a cost growing with the table.
The workflow_refresh_statistics function (migration 0030) analyzes the young tables that
changed enough; ANALYZE makes every connection plan those statements again with the new
statistics. Past UNTIL_ROWS the statistics describe enough rows for plans to hold as the table
grows, and autovacuum's own cadence keeps them current.
"""

from __future__ import annotations

import msgspec

from runtime.store.database import Database
from runtime.store.rows import fetch_one

# A table is analyzed once this many rows changed since its last analysis...
MIN_CHANGES = 500
# ...and at least this share of its size (so a growing table is analyzed as it doubles)...
GROWTH = 1.0
# ...while its last analysis saw fewer rows than this: about six analyses in a table's life.
UNTIL_ROWS = 10_000
REFRESH_STATISTICS = (
    "SELECT workflow_refresh_statistics("
    "%(min_changes)s::bigint, %(growth)s::real, %(until_rows)s::real) AS analyzed"
)


class _Refreshed(msgspec.Struct, frozen=True):
    analyzed: int


async def refresh_planner_statistics(db: Database) -> int:
    """Analyze the young tables that changed enough since their last analysis; how many were."""
    params = {"min_changes": MIN_CHANGES, "growth": GROWTH, "until_rows": UNTIL_ROWS}
    async with db.transaction() as conn:
        row = await fetch_one(conn, REFRESH_STATISTICS, params, _Refreshed)
    return 0 if row is None else row.analyzed
