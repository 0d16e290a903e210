"""The invocation queries.sql: well-formed, and every block used exactly by name."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.admission.batches import BATCH_MAX
from runtime.invocation import store
from runtime.store.queries import query_usage_problems

INVOCATION = Path(store.__file__).parent


def test_every_query_block_is_used_and_every_used_name_exists() -> None:
    sources = sorted(INVOCATION.rglob("*.py"))
    assert query_usage_problems(INVOCATION / "queries.sql", sources) == []


# The admission function family, defined once (0025-0084 hold its history).
MIGRATIONS = INVOCATION.parent.parent / "migrations"
ADMIT_FUNCTION = MIGRATIONS / "functions" / "invocation_admission.sql"


def _function_body(name: str) -> str:
    text = ADMIT_FUNCTION.read_text(encoding="utf-8")
    text = text[text.index(f"CREATE OR REPLACE FUNCTION {name}(") :]
    text = text[text.index("LANGUAGE plpgsql") :]
    return text[: text.index("$$;")]


def _admit_function_body() -> str:
    """workflow_admit_invoke_v2's body with the steps it shares with workflow_admit_start
    (workflow_admit_claimed_run) read where it calls them."""
    body = _function_body("workflow_admit_invoke_v2")
    call = body.index("FROM workflow_admit_claimed_run(")
    return body[:call] + _function_body("workflow_admit_claimed_run") + body[call:]


def test_admission_is_one_statement_of_the_admit_function() -> None:
    assert "workflow_admit_invoke_v2(" in store.QUERIES["admit_invoke"]
    assert "workflow_admit_invoke_batch(" in store.QUERIES["admit_invoke_batch"]
    # The cached revision is read without a lock; the function takes the locks.
    assert "FOR SHARE" not in store.QUERIES["select_active_revision"]


def test_admission_locks_the_version_then_the_head_and_the_tool_lock_last() -> None:
    body = _admit_function_body()
    version = body.index("FROM wf_definition_version_t v")
    head = body.index("FROM workflow_tool_publication_t h")
    share = [m.start() for m in re.finditer(r"FOR SHARE;", body)]
    assert len(share) == 2 and version < share[0] < head < share[1]
    tool_lock = body.index("pg_advisory_xact_lock")
    # Seed 000 lock order (version row, then head); the serialized stretch starts only after
    # the run and its records are written, so it spans the counts and the commit alone.
    for write in ("workflow_enqueue_run(", "workflow_record_run_spec(", "INSERT INTO"):
        assert body.index(write) < tool_lock
    assert body.index("workflow_claim_idempotency_v2(") < tool_lock


def test_start_admits_through_the_shared_steps_in_one_statement_without_a_head_lock() -> None:
    assert "workflow_admit_start(" in store.QUERIES["admit_start"]
    # The saved head is read without a lock (as workflow_start always did) and never locked.
    assert "FOR SHARE" not in store.QUERIES["select_head"]
    body = _function_body("workflow_admit_start")
    assert "FOR SHARE" not in body and "FOR UPDATE" not in body
    assert "pg_advisory_xact_lock" not in body
    # The claim, the run, its spec and its authority are invoke's own steps; the owner record
    # is written by the same function as invoke's, after them.
    shared = body.index("FROM workflow_admit_claimed_run(")
    assert shared < body.index("workflow_record_invocation(")
    for step in ("workflow_claim_idempotency_v2(", "workflow_enqueue_run(", "INSERT INTO"):
        assert step not in body
    assert "workflow_record_invocation(" in _function_body("workflow_admit_invoke_v2")


def test_the_shared_steps_claim_then_refuse_then_write_the_run() -> None:
    body = _function_body("workflow_admit_claimed_run")
    claim = body.index("workflow_claim_idempotency_v2(")
    refuse = body.index("RAISE EXCEPTION 'workflow_capacity_shed'")
    writes = [
        body.index(step)
        for step in (
            "workflow_enqueue_run(",
            "workflow_record_run_spec(",
            "INSERT INTO workflow_action_authority_t",
        )
    ]
    assert claim < refuse < writes[0] < writes[1] < writes[2]


def test_the_service_batches_no_more_calls_than_the_statement_admits() -> None:
    text = ADMIT_FUNCTION.read_text(encoding="utf-8")
    declared = re.search(
        r"workflow_admission_batch_max\(\) RETURNS integer\n.*'SELECT (\d+)'", text
    )
    assert declared is not None and int(declared.group(1)) == BATCH_MAX


def test_a_batched_admission_never_takes_the_tools_lock_exclusively() -> None:
    body = _admit_function_body()
    batched = body.index("IF p_batched AND NOT shared_lock THEN")
    assert "RAISE EXCEPTION 'workflow_admission_near_limit'" in body[batched : batched + 200]
    assert batched < body.index("pg_advisory_xact_lock")


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


def test_the_admit_function_enqueues_through_the_schedulers_function_only() -> None:
    words = set(re.findall(r"[a-z_]+", _admit_function_body()))
    assert sorted(words & set(SCHEDULER_TABLES)) == []
    assert {"workflow_run_state", "workflow_enqueue_run"} <= words
