"""Background jobs: the operation receipt sweep runs on its own and spares young receipts."""

from __future__ import annotations

import asyncio

import pytest

from runtime.collaborators import Services
from runtime.composition.jobs import PeriodicJob, service_jobs
from runtime.store import Database
from tests.support.waiting import wait_until


async def _ledger_ids(db: Database) -> set[str]:
    async with db.connection() as conn:
        cursor = await conn.execute(
            "SELECT operation_id::text AS id FROM workflow_publication_operation_t"
        )
        return {row["id"] for row in await cursor.fetchall()}


async def _insert_receipt(database_url: str, operation_id: str, age_days: int) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO workflow_publication_operation_t (host_id, operation_id, tool_name,"
            " request_digest, requested_by, response, is_error, created_at) VALUES"
            " (gen_random_uuid(), %s, 'workflow_definition_publish', %s, 'steve', '{}'::jsonb,"
            " false, now() - make_interval(days => %s))",
            (operation_id, "sha256:" + "0" * 64, age_days),
        )


async def _gone(db: Database, operation_id: str) -> bool:
    return operation_id not in await _ledger_ids(db)


@pytest.mark.requirement("000:Lost receipts")
async def test_the_receipt_sweep_job_removes_only_receipts_older_than_thirty_days(
    services: Services, db: Database, database_url: str
) -> None:
    old, young = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
    await _insert_receipt(database_url, old, 31)
    await _insert_receipt(database_url, young, 29)
    services.settings.publication.receipt_sweep_interval_s = 0.05
    jobs = service_jobs(services)
    for job in jobs:
        job.start()
    try:
        await wait_until(
            lambda: _gone(db, old), what="the sweep removing the old receipt", within_s=5
        )
    finally:
        for job in jobs:
            await job.stop()
    assert await _ledger_ids(db) == {young}


async def test_a_failing_job_keeps_running() -> None:
    calls = 0
    done = asyncio.Event()

    async def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls >= 3:
            done.set()
        raise RuntimeError("boom")

    job = PeriodicJob("flaky", 0.01, flaky)
    job.start()
    try:
        async with asyncio.timeout(5):
            await done.wait()
    finally:
        await job.stop()
    assert calls >= 3
