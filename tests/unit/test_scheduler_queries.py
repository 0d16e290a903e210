"""The scheduler's queries.sql: well-formed, and every block used exactly by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.scheduler import faults
from runtime.scheduler.models import BudgetAmounts, SchedulerSettings
from runtime.scheduler.store.sql import QUERIES, QUERIES_PATH
from runtime.store.queries import query_usage_problems

SCHEDULER = Path(QUERIES_PATH).parent


def test_every_query_block_is_used_and_every_used_name_exists() -> None:
    sources = sorted(SCHEDULER.rglob("*.py"))
    assert query_usage_problems(QUERIES_PATH, sources) == []


def test_every_write_to_a_claimed_task_is_fenced_by_lease_and_token() -> None:
    fenced = ["complete_task", "fail_task", "release_task", "renew_leases"]
    fenced += ["mark_effect_possible", "confirm_effect", "debit_budget", "reconcile_budget"]
    for name in fenced:
        assert "lease_id" in QUERIES[name] and "fencing_token" in QUERIES[name], name


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
