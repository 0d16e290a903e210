"""Plans of the hot lookups stay point lookups, whatever the statistics say and as tables grow.

Found under load on a fresh install (docs/PERFORMANCE.md): lookups of one task or one run,
planned while the tables were nearly empty or while nothing ran, read every row of the host
through an index keyed on the host alone, at a cost growing with the table or the queue.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from runtime.scheduler import read_class_load
from runtime.scheduler.store.sql import QUERIES
from runtime.store import Database
from runtime.store.statistics import MIN_CHANGES, refresh_planner_statistics

LIVE = ("ACCEPTED", "RUNNING", "WAITING")


async def add_ended_runs(admin: psycopg.AsyncConnection[Any], host_id: uuid.UUID, n: int) -> None:
    """n ended runs of host_id, one done task each (the usual picture of a busy host)."""
    await admin.execute(
        "INSERT INTO workflow_process (host_id, process_id, execution_class, deadline_ts, state,"
        " finished_ts) SELECT %s, gen_random_uuid(), 'interactive', now() + interval '1 hour',"
        " 'COMPLETED', now()"
        " FROM generate_series(1, %s)",
        (host_id, n),
    )
    await admin.execute(
        "INSERT INTO workflow_task (host_id, process_id, step_no, kind, payload, execution_class,"
        " state) SELECT p.host_id, p.process_id, 0, 'set', '{}', 'interactive', 'done'"
        " FROM workflow_process p WHERE p.host_id = %s AND NOT EXISTS"
        " (SELECT 1 FROM workflow_task t WHERE t.process_id = p.process_id)",
        (host_id,),
    )
    # Counts reach the statistics the refresh reads at this session's next flush: now.
    await admin.execute("SELECT pg_stat_force_next_flush()")


async def index_reads(admin: psycopg.AsyncConnection[Any]) -> dict[str, int]:
    """Index entries read so far, per index of workflow_task (a fresh statistics snapshot)."""
    await admin.execute("SELECT pg_stat_clear_snapshot()")
    cursor = await admin.execute(
        "SELECT indexrelname AS name, idx_tup_read AS n FROM pg_stat_user_indexes"
        " WHERE relname = 'workflow_task'"
    )
    return {row["name"]: int(row["n"]) for row in await cursor.fetchall()}


async def lookup(conn: psycopg.AsyncConnection[Any], host_id: uuid.UUID, task_id: Any) -> None:
    """The admission's read-back of its task (workflow_enqueued_task), stats flushed after."""
    await conn.execute("SELECT * FROM workflow_enqueued_task(%s, %s)", (host_id, task_id))
    await conn.execute("SELECT pg_stat_force_next_flush()")


async def test_a_lookup_planned_while_the_tables_were_nearly_empty_is_replanned_as_they_grow(
    db: Database, database_url: str, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id = uuid.uuid4()
    await add_ended_runs(admin, host_id, 3)
    row = await (await admin.execute("SELECT task_id FROM workflow_task LIMIT 1")).fetchone()
    assert row is not None
    task_id = row["task_id"]
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as session:
        # Past the fifth call PL/pgSQL keeps one generic plan for the session.
        for _ in range(8):
            await lookup(session, host_id, task_id)
        await add_ended_runs(admin, host_id, 3 * MIN_CHANGES)
        before = await index_reads(admin)
        await lookup(session, host_id, task_id)
        stale = {name: n - before[name] for name, n in (await index_reads(admin)).items()}

        assert await refresh_planner_statistics(db) >= 1

        before = await index_reads(admin)
        await lookup(session, host_id, task_id)
        fresh = {name: n - before[name] for name, n in (await index_reads(admin)).items()}
    assert sum(fresh.values()) == 1, f"after the refresh {fresh} (before it {stale})"
    assert fresh["workflow_task_pk"] == 1


async def test_the_refresh_leaves_tables_that_changed_little_alone(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    await add_ended_runs(admin, uuid.uuid4(), MIN_CHANGES)
    assert await refresh_planner_statistics(db) >= 1
    await add_ended_runs(admin, uuid.uuid4(), 10)
    assert await refresh_planner_statistics(db) == 0


async def test_tables_analyzed_once_they_were_large_are_left_to_autovacuum(
    admin: psycopg.AsyncConnection[Any],
) -> None:
    host_id = uuid.uuid4()
    await add_ended_runs(admin, host_id, 1500)
    await admin.execute("ANALYZE")
    await add_ended_runs(admin, host_id, 3000)

    async def refresh(until_rows: int) -> int:
        cursor = await admin.execute(
            "SELECT workflow_refresh_statistics(500, 1.0, %s) AS n", (until_rows,)
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row["n"])

    assert await refresh(until_rows=1000) == 0
    # The same tables, still young by a larger measure, are analyzed (the runs and tasks).
    assert await refresh(until_rows=100_000) == 2


async def generic_plan(admin: psycopg.AsyncConnection[Any], statement: str, types: str) -> str:
    """EXPLAIN of statement's generic plan (the plan a PL/pgSQL function keeps)."""
    await admin.execute("SET plan_cache_mode = force_generic_plan")
    name = f"q{uuid.uuid4().hex}"
    await admin.execute(f"PREPARE {name}({types}) AS {statement}")
    nulls = ", ".join("NULL" for _ in types.split(","))
    cursor = await admin.execute(f"EXPLAIN EXECUTE {name}({nulls})")
    return "\n".join(row["QUERY PLAN"] for row in await cursor.fetchall())


async def test_the_fence_of_a_running_task_is_a_point_lookup_when_nothing_ran_at_analysis(
    admin: psycopg.AsyncConnection[Any],
) -> None:
    await add_ended_runs(admin, uuid.uuid4(), 2000)
    await admin.execute("ANALYZE workflow_task")
    plan = await generic_plan(
        admin,
        "SELECT t.process_id FROM workflow_task t WHERE t.host_id = $1 AND t.task_id = $2"
        " AND t.state = 'running' FOR UPDATE OF t",
        "uuid, uuid",
    )
    conditions = [line for line in plan.splitlines() if "Index Cond" in line]
    assert conditions and all("task_id" in line for line in conditions), plan


async def test_the_end_of_a_live_run_is_a_point_lookup_when_nothing_was_live_at_analysis(
    admin: psycopg.AsyncConnection[Any],
) -> None:
    await add_ended_runs(admin, uuid.uuid4(), 2000)
    await admin.execute("ANALYZE workflow_process")
    plan = await generic_plan(
        admin,
        "UPDATE workflow_process p SET updated_ts = now() WHERE p.host_id = $1"
        f" AND p.process_id = $2 AND p.state IN {LIVE!r}".replace('"', "'"),
        "uuid, uuid",
    )
    conditions = [line for line in plan.splitlines() if "Index Cond" in line]
    assert conditions and all("process_id" in line for line in conditions), plan


async def test_the_queue_sampler_reads_only_live_tasks(
    admin: psycopg.AsyncConnection[Any],
) -> None:
    await add_ended_runs(admin, uuid.uuid4(), 5000)
    await admin.execute("ANALYZE workflow_task")
    cursor = await admin.execute("EXPLAIN " + QUERIES["sample_class_load"])
    plan = "\n".join(row["QUERY PLAN"] for row in await cursor.fetchall())
    assert "Seq Scan" not in plan, plan


async def test_the_queue_sampler_counts_runnable_and_running_tasks_per_class(
    db: Database, admin: psycopg.AsyncConnection[Any]
) -> None:
    host_id = uuid.uuid4()
    await add_ended_runs(admin, host_id, 5)
    await admin.execute(
        "INSERT INTO workflow_process (host_id, process_id, execution_class, deadline_ts)"
        " VALUES (%s, %s, 'interactive', now() + interval '1 hour')",
        (host_id, process_id := uuid.uuid4()),
    )
    tasks = [
        # (class, state, available in, enqueued ago): runnable for 2 s and for 1 s
        ("interactive", "ready", "-2 s", "3 s"),
        ("interactive", "ready", "-1 s", "3 s"),
        ("interactive", "ready", "1 hour", "5 s"),  # not runnable yet
        ("interactive", "running", "0 s", "0 s"),
        ("batch", "running", "0 s", "0 s"),
        ("batch", "running", "0 s", "0 s"),
    ]
    for step, (execution_class, state, available_in, enqueued_ago) in enumerate(tasks, start=1):
        running = state == "running"
        await admin.execute(
            "INSERT INTO workflow_task (host_id, process_id, step_no, kind, payload,"
            " execution_class, state, available_at, enqueued_ts, lease_id, fencing_token,"
            " lease_expires_ts) VALUES (%s, %s, %s, 'set', '{}', %s, %s,"
            " now() + %s::interval, now() - %s::interval, %s, %s, %s)",
            (
                host_id, process_id, step, execution_class, state, available_in, enqueued_ago,
                uuid.uuid4() if running else None, step,
                "infinity" if running else None,
            ),
        )  # fmt: skip

    load = await read_class_load(db)

    assert load["interactive"].ready == 2
    assert load["interactive"].running == 1
    assert 2000 <= load["interactive"].oldest_ready_ms < 60_000
    assert load["batch"].ready == 0
    assert load["batch"].running == 2
    assert load["batch"].oldest_ready_ms == 0
