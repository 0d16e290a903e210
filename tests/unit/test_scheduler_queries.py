"""The scheduler's queries.sql: well-formed, and every block used exactly by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runtime.scheduler import faults, service
from runtime.scheduler.models import BudgetAmounts, SchedulerSettings
from runtime.scheduler.store.sql import QUERIES, QUERIES_PATH
from runtime.store.queries import query_usage_problems

SCHEDULER = Path(QUERIES_PATH).parent
# The completion function as it stands: 0017 wrote it, 0018 replaced it (no NOTIFY inside).
MIGRATIONS = SCHEDULER.parent.parent / "migrations"
COMPLETE_FUNCTION = MIGRATIONS / "0018_scheduler_complete_without_notify.sql"
FENCE = "t.lease_id = p_lease_id AND t.fencing_token = p_fencing_token AND t.state = 'running'"


def test_every_query_block_is_used_and_every_used_name_exists() -> None:
    sources = sorted(SCHEDULER.rglob("*.py"))
    assert query_usage_problems(QUERIES_PATH, sources) == []


def test_every_write_to_a_claimed_task_is_fenced_by_lease_and_token() -> None:
    fenced = ["complete_task", "fail_task", "release_task", "renew_leases"]
    fenced += ["mark_effect_possible", "confirm_effect", "debit_budget", "reconcile_budget"]
    fenced += ["complete_task_at_once"]
    for name in fenced:
        assert "lease_id" in QUERIES[name] and "fencing_token" in QUERIES[name], name


def test_a_completion_is_one_statement_of_the_fenced_complete_function() -> None:
    sql = QUERIES["complete_task_at_once"]
    assert sql.count(";") <= 1 and sql.startswith("SELECT * FROM workflow_complete_task(")
    text = COMPLETE_FUNCTION.read_text(encoding="utf-8")
    assert text.count("CREATE OR REPLACE FUNCTION") == 1
    body = " ".join(text[text.index("LANGUAGE plpgsql AS $$") :].split())
    # The fence locks the task before any write, and the task update repeats it.
    lock = body.index(FENCE + " FOR UPDATE OF t;")
    first_write = min(body.index("UPDATE workflow_budget"), body.index("UPDATE workflow_task"))
    assert lock < first_write and body.count(FENCE) == 2
    # Nothing inside notifies: a notifying commit holds the notification queue's lock through
    # its WAL flush, queueing every completion behind the last (the service announces after).
    assert "pg_notify" not in body
    # The next task keeps its named query's live-run rules.
    assert body.count("state IN ('ACCEPTED', 'RUNNING', 'WAITING')") == 3


def test_budget_amounts_refuse_negative_or_non_integer_counts() -> None:
    with pytest.raises(ValueError):
        BudgetAmounts(attempts=-1)
    with pytest.raises(ValueError):
        BudgetAmounts(cost_units=True)


def test_batch_may_borrow_all_but_one_interactive_slot_by_default() -> None:
    assert SchedulerSettings(interactive_slots=4).effective_borrow_slots == 3
    assert SchedulerSettings(interactive_slots=4, borrow_slots=9).effective_borrow_slots == 4


async def test_a_fault_point_runs_its_hook_and_configured_raise() -> None:
    reached: list[str] = []

    async def hook() -> None:
        reached.append("hook")

    faults.set_hook("unit_point", hook)
    faults.configure("unit_point=raise")
    try:
        with pytest.raises(RuntimeError, match="unit_point"):
            await faults.point("unit_point")
    finally:
        faults.set_hook("unit_point", None)
        faults.configure("")
    assert reached == ["hook"]


def test_the_service_batches_no_more_completions_than_the_statement_takes() -> None:
    text = (MIGRATIONS / "0085_scheduler_complete_batches.sql").read_text(encoding="utf-8")
    declared = re.search(
        r"workflow_completion_batch_max\(\) RETURNS integer\n.*'SELECT (\d+)'", text
    )
    assert declared is not None and int(declared.group(1)) == service.COMPLETION_BATCH_MAX
