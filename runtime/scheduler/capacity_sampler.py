"""The queue sampler of deadline-aware admission: one cheap read per interval, per process."""

from __future__ import annotations

from runtime.scheduler import capacity
from runtime.scheduler.capacity import ClassLoad
from runtime.scheduler.store.sql import QUERIES
from runtime.store import Database


async def read_class_load(db: Database) -> dict[str, ClassLoad]:
    """Ready and running tasks per execution class in the shared queue."""
    async with db.connection() as conn:
        cursor = await conn.execute(QUERIES["sample_class_load"])
        rows = await cursor.fetchall()
    return {
        row["execution_class"]: ClassLoad(ready=int(row["ready"]), running=int(row["running"]))
        for row in rows
    }


async def sample_once(db: Database) -> None:
    """Read the queue and hand it to this process's estimator."""
    load = await read_class_load(db)
    capacity.ESTIMATOR.record_sample(load)
