"""Waiting for a run within its bounds, and cancelling it as its cancellation policy allows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runtime.errors import WorkflowError
from runtime.execution import read_run, wait_for_result
from runtime.invocation import store
from runtime.invocation.results import (
    LIVE_STATES,
    invoke_output,
    still_running,
)
from runtime.scheduler import timeout_error
from runtime.store import Database

MAX_WAIT_MS = 20_000


def cancelled_by_caller() -> WorkflowError:
    """The stored error of a run its caller cancelled."""
    return WorkflowError(
        "WORKFLOW_CANCELLED", "the run was cancelled by its caller", status="cancelled"
    )


async def wait_run(
    db: Database, host_id: str, process_id: str, wait_ms: int
) -> dict[str, Any] | None:
    """The run once terminal or after wait_ms (bounded by MAX_WAIT_MS); None if unknown."""
    bounded = max(0, min(wait_ms, MAX_WAIT_MS))
    if bounded == 0:
        return await read_run(db, host_id, process_id)
    return await wait_for_result(db, host_id, process_id, bounded / 1000)


async def cancel_run(db: Database, host_id: str, process_id: str, error: WorkflowError) -> str:
    """Cancel per policy: cancelled | cancellationRequested | alreadyTerminal | disabled | effect.

    Ending a run whose effect state is none is always safe (nothing was dispatched); after an
    effect only a cooperative run is asked to stop, a before-effects-only run is left to finish.
    """
    async with db.transaction() as conn:
        row = await store.lock_run(conn, host_id, process_id)
        if row is None or row["state"] not in LIVE_STATES:
            return "alreadyTerminal"
        policy = row["cancellation_policy"]
        if policy == "disabled":
            return "disabled"
        if row["effect_state"] == "none":
            await store.end_run(conn, host_id, process_id, error, state="CANCELLED")
            return "cancelled"
        if policy == "cooperative":
            await store.request_cancel(conn, host_id, process_id)
            return "cancellationRequested"
        return "effect"


async def finish_invoke(
    db: Database, host_id: str, process_id: str, definition_digest: str, sync_wait_ms: int
) -> dict[str, Any]:
    """Wait min(syncWaitMs, deadline - now); output, stored error or WORKFLOW_TIMEOUT."""
    run = await _owned(db, host_id, process_id)
    deadline: datetime = run["deadline_ts"]
    if run["state"] in LIVE_STATES:
        remaining_ms = int((deadline - datetime.now(UTC)).total_seconds() * 1000)
        run = await wait_run(db, host_id, process_id, min(sync_wait_ms, remaining_ms)) or run
    if run["state"] not in LIVE_STATES:
        return invoke_output(run, process_id, definition_digest)
    after_effect = run.get("effect_state", "none") != "none"
    if datetime.now(UTC) < deadline:
        raise still_running(process_id, retryable=True, after_effect=after_effect)
    outcome = await cancel_run(db, host_id, process_id, timeout_error(after_effect=after_effect))
    if outcome == "alreadyTerminal":
        return invoke_output(await _owned(db, host_id, process_id), process_id, definition_digest)
    # A disabled policy ignores the deadline: the run can still finish and a retry re-attaches.
    raise still_running(process_id, retryable=outcome == "disabled", after_effect=after_effect)


async def _owned(db: Database, host_id: str, process_id: str) -> dict[str, Any]:
    async with db.transaction(read_only=True) as conn:
        row = await store.select_owned_run(conn, host_id, process_id)
    assert row is not None  # admitted or claimed in a committed transaction
    return row
