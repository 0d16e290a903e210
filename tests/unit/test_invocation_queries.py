"""The invocation queries.sql: well-formed, and every block used exactly by name."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.invocation import store
from runtime.store.queries import query_usage_problems

INVOCATION = Path(store.__file__).parent


def test_every_query_block_is_used_and_every_used_name_exists() -> None:
    sources = sorted(INVOCATION.rglob("*.py"))
    assert query_usage_problems(INVOCATION / "queries.sql", sources) == []


def test_admission_reads_lock_the_tool_head_and_version_for_share() -> None:
    assert "FOR SHARE" in store.QUERIES["lock_active_revision"]
    assert "FOR SHARE" in store.QUERIES["lock_version_for_share"]
    assert "pg_advisory_xact_lock" in store.QUERIES["lock_tool_admission"]


# The scheduler's own tables (migrations 0010-0012): invocation reads run state only through
# the scheduler's read contract, the workflow_run_state view, and writes it only through
# runtime.scheduler.service.
SCHEDULER_TABLES = (
    "workflow_process",
    "workflow_task",
    "workflow_step",
    "workflow_budget",
    "workflow_budget_reservation",
)


def test_invocation_queries_never_name_the_schedulers_tables() -> None:
    text = (INVOCATION / "queries.sql").read_text(encoding="utf-8")
    words = set(re.findall(r"[a-z_]+", text))
    assert sorted(words & set(SCHEDULER_TABLES)) == []
    assert "workflow_run_state" in words
