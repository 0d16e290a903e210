"""The human tasks' queries.sql: every block used by name, scheduler rows written in two only."""

from __future__ import annotations

import re

from runtime.human_tasks import store
from runtime.store.queries import query_usage_problems

HUMAN_TASKS = store.QUERIES.path.parent
# The scheduler's own tables (migrations 0010-0012).
SCHEDULER_TABLES = frozenset(
    {
        "workflow_process",
        "workflow_task",
        "workflow_step",
        "workflow_budget",
        "workflow_budget_reservation",
    }
)


def test_every_human_task_query_block_is_used_and_every_used_name_exists() -> None:
    sources = sorted(HUMAN_TASKS.rglob("*.py"))
    assert query_usage_problems(store.QUERIES.path, sources) == []


def test_only_the_wake_and_the_resume_of_a_parked_run_name_the_schedulers_tables() -> None:
    # Parking is the one place another room writes the scheduler's rows (a parked task's
    # availability, a run's WAITING state); every other statement here is its own table's.
    naming = sorted(
        name
        for name, sql in store.QUERIES.items()
        if set(re.findall(r"[a-z_]+", sql)) & SCHEDULER_TABLES
    )
    assert naming == ["resume_waiting_run", "wake_parked_task"]
