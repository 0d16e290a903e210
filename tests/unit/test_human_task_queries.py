"""The human tasks' queries.sql and triggers: blocks used by name, scheduler rows written in two
only, and the triggers the room relies on as its modules name them."""

from __future__ import annotations

import re

from runtime.human_tasks import parked_task_payload, store
from runtime.human_tasks.parking import HUMAN_TASK_KEY
from runtime.store.queries import query_usage_problems

HUMAN_TASKS = store.QUERIES.path.parent
# The schema as the migrations leave it (a later migration could have replaced a trigger).
SCHEMA = HUMAN_TASKS.parent.parent / "migrations" / "schema.snapshot.sql"
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


def test_the_park_trigger_fires_on_the_parked_tasks_payload_and_the_wake_finds_it_by_it() -> None:
    schema = SCHEMA.read_text(encoding="utf-8")
    assert (
        "CREATE TRIGGER workflow_task_park_on_human_task BEFORE INSERT ON public.workflow_task"
        f" FOR EACH ROW WHEN ((new.payload ? '{HUMAN_TASK_KEY}'::text))"
        " EXECUTE FUNCTION public.workflow_park_on_human_task();"
    ) in schema
    assert HUMAN_TASK_KEY in parked_task_payload({"position": 1}, "t")
    assert f"t.payload ->> '{HUMAN_TASK_KEY}'" in store.QUERIES["wake_parked_task"]


def test_the_run_end_trigger_closes_open_tasks_as_cancelled() -> None:
    schema = SCHEMA.read_text(encoding="utf-8")
    assert (
        "CREATE TRIGGER workflow_process_close_human_tasks AFTER UPDATE OF state ON"
        " public.workflow_process"
    ) in schema
    assert "EXECUTE FUNCTION public.workflow_close_human_tasks_of_ended_run();" in schema
    function = schema[schema.index("FUNCTION public.workflow_close_human_tasks_of_ended_run()") :]
    assert "SET state = 'cancelled'" in function[: function.index("$$;")]
    # No statement of the room writes 'cancelled': the trigger is the only way a task gets it.
    assert not any("'cancelled'" in sql for sql in store.QUERIES.values())
