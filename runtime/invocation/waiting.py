"""Waiting for a run within its bounds, and cancelling it as its cancellation policy allows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from generated.models import WorkflowInvokeOutput
from runtime.errors import WorkflowError
from runtime.execution import RunWatch, read_run, wait_for_result
from runtime.invocation import store
from runtime.invocation.results import invoke_output, state_unknown, still_running
from runtime.scheduler import timeout_error
from runtime.scheduler.models import LIVE_STATES, CancelOutcome, RunSnapshot
from runtime.scheduler.service import cancel_process
from runtime.store import Database, StoreUnavailable

MAX_WAIT_MS = 20_000


def cancelled_by_caller() -> WorkflowError:
    """The stored error of a run its caller cancelled."""
    return WorkflowError(
        "WORKFLOW_CANCELLED", "the run was cancelled by its caller", status="cancelled"
    )


async def wait_run(db: Database, host_id: str, process_id: str, wait_ms: int) -> RunSnapshot | None:
    """The run once terminal or after wait_ms (bounded by MAX_WAIT_MS); None if unknown."""
    bounded = max(0, min(wait_ms, MAX_WAIT_MS))
    if bounded == 0:
        return await read_run(db, host_id, process_id)
    return await wait_for_result(db, host_id, process_id, bounded / 1000)


async def cancel_run(
    db: Database, host_id: str, process_id: str, error: WorkflowError
) -> CancelOutcome:
    """Cancel per the run's policy in its own transaction (the scheduler decides how)."""
    async with db.transaction() as conn:
        return await cancel_process(conn, host_id, process_id, error)


@dataclass(frozen=True)
class WaitedRun:
    """The run an invoke waits for, as admission saw it."""

    process_id: str
    definition_digest: str
    sync_wait_ms: int
    admitted: store.AdmittedRun


async def finish_invoke(
    db: Database,
    watch: RunWatch,
    host_id: str,
    waited: WaitedRun,
    current: RunSnapshot | None,
) -> WorkflowInvokeOutput:
    """Wait min(syncWaitMs, deadline - now); output, stored error or WORKFLOW_TIMEOUT.

    current is the run as known now (None: read it under the watch before waiting). The run
    is admitted: a database lost meanwhile is answered naming it, never as "unavailable" with
    no instance, which reads as "nothing was admitted" (issue 42 item 7).
    """
    try:
        return await _finish_invoke(db, watch, host_id, waited, current)
    except StoreUnavailable:
        raise state_unknown(waited.process_id) from None


async def _finish_invoke(
    db: Database,
    watch: RunWatch,
    host_id: str,
    waited: WaitedRun,
    current: RunSnapshot | None,
) -> WorkflowInvokeOutput:
    process_id, definition_digest = waited.process_id, waited.definition_digest
    deadline = waited.admitted.deadline_ts
    run: RunSnapshot = waited.admitted
    if run.state in LIVE_STATES:
        remaining_ms = int((deadline - datetime.now(UTC)).total_seconds() * 1000)
        wait_ms = max(0, min(waited.sync_wait_ms, remaining_ms, MAX_WAIT_MS))
        run = await watch.settled(host_id, wait_ms / 1000, current) or run
    if run.state not in LIVE_STATES:
        return invoke_output(run, process_id, definition_digest)
    after_effect = run.effect_state != "none"
    if datetime.now(UTC) < deadline:
        raise still_running(process_id, retryable=True, after_effect=after_effect)
    outcome = await cancel_run(db, host_id, process_id, timeout_error(after_effect=after_effect))
    if outcome in ("cancelled", "alreadyTerminal"):
        # Ended now by this call or a moment ago by another path (the deadline sweep, the
        # worker): either way the answer is the stored end, the same one every replay and
        # workflow_get_result read.
        return invoke_output(await _owned(db, host_id, process_id), process_id, definition_digest)
    # Past deadline_ts the answer is final whatever the policy (seed 000 "Waiting, timeout and
    # re-attach"); a run left to finish (a dispatched write, or a disabled policy) still keeps
    # its result for the replay window, where a later call with the same key finds it.
    raise still_running(process_id, retryable=False, after_effect=after_effect)


async def _owned(db: Database, host_id: str, process_id: str) -> store.OwnedRun:
    async with db.transaction(read_only=True) as conn:
        row = await store.select_owned_run(conn, host_id, process_id)
    assert row is not None  # admitted or claimed in a committed transaction
    return row
