"""The lifecycle tools: status, result, bounded wait and cancel of the caller's own runs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from generated.models import (
    Compensation,
    WorkflowCancelOutput,
    WorkflowGetResultOutput,
    WorkflowGetStatusOutput,
)
from runtime.errors import WorkflowError, policy_denied
from runtime.execution import compensation_store
from runtime.human_tasks import store as human_tasks
from runtime.invocation import disclosure, rules, store
from runtime.invocation.results import (
    compensation_document,
    not_visible,
    result_document,
    status_document,
)
from runtime.invocation.waiting import MAX_WAIT_MS, cancel_run, cancelled_by_caller, wait_run
from runtime.scheduler.models import LIVE_STATES
from runtime.security import InvocationContext
from runtime.security.settings import SecuritySettings
from runtime.store import Database


def _owned_by(run: store.OwnedRun, ctx: InvocationContext) -> bool:
    """Seed 001 "Asynchronous Tools": host (the query's scope), client principal and subject.

    A shared service principal alone is not isolation, and neither is a user id alone: the same
    user through another client, or another subject carrying the same user id, sees nothing.
    A start run is the starter's only while the current token still holds a role that
    authorized the start (issue 22 item 5): a starter who lost it sees nothing either.
    """
    return (
        run.user_id == ctx.user_id
        and run.end_user_subject == ctx.subject
        and run.principal_subject == rules.principal_of(ctx)
        and (run.starter_roles is None or ctx.has_any_role(run.starter_roles))
    )


async def _own_run(db: Database, ctx: InvocationContext, instance_id: str) -> store.OwnedRun:
    """The run if it belongs to the caller (host, client principal, subject); else one refusal."""
    try:
        process_id = str(uuid.UUID(instance_id))
    except ValueError:
        raise not_visible() from None
    async with db.transaction(read_only=True) as conn:
        run = await store.select_owned_run(conn, ctx.host_id, process_id)
    if run is None or not _owned_by(run, ctx):
        raise not_visible()
    return run


def _disclosed(
    run: store.OwnedRun, ctx: InvocationContext, security: SecuritySettings | None, part: str
) -> frozenset[str]:
    """The parts of the run the caller sees: its current authorization within the ceiling the
    run stored at acceptance (disclosure.py). Refuses unless part is one of them: as unknown
    when the caller may see nothing of the run, else as denied."""
    parts = disclosure.visible_parts(
        run.disclosure_ceiling, disclosure.allowed_parts(ctx, security)
    )
    if part in parts:
        return parts
    if disclosure.STATUS not in parts:
        raise not_visible()
    raise policy_denied(
        "the run's result is beyond what the caller may see: its authorization now, or when "
        "the run was accepted, covers only its status"
    )


async def _compensation(db: Database, host_id: str, run: store.OwnedRun) -> Compensation | None:
    """The compensation of a FAILED or CANCELLED run (None for any other run).

    Read only for a run that wrote: a run without an effect needed none, and a run that
    never fails never reads it.
    """
    if run.state not in ("FAILED", "CANCELLED"):
        return None
    if run.effect_state == "none":
        return compensation_document(None)
    async with db.transaction(read_only=True) as conn:
        record = await compensation_store.select_compensation(conn, host_id, run.process_id)
    return compensation_document(record)


def _started(compensation: Compensation | None) -> Compensation | None:
    """A compensation the runtime started (result errors name none that was not needed).

    The stored error of a run that needed none reads exactly as its first answer did.
    """
    return None if compensation is None or compensation.state == "not_needed" else compensation


async def get_status(
    db: Database,
    ctx: InvocationContext,
    instance_id: str,
    security: SecuritySettings | None = None,
) -> WorkflowGetStatusOutput:
    """workflow_get_status: state, timestamps, retryability, result or error when terminal.

    A WAITING run also names its open human tasks: what an assignee's inbox would show. The
    result is shown only when the disclosure ceiling and the current authorization allow it.
    """
    run = await _own_run(db, ctx, instance_id)
    parts = _disclosed(run, ctx, security, disclosure.STATUS)
    with_result = disclosure.RESULT in parts
    if run.state != "WAITING":
        return status_document(
            run, compensation=await _compensation(db, ctx.host_id, run), with_result=with_result
        )
    async with db.transaction(read_only=True) as conn:
        open_ids = await human_tasks.open_task_ids(conn, ctx.host_id, run.process_id)
    return status_document(run, open_ids, with_result=with_result)


async def get_result(
    db: Database,
    ctx: InvocationContext,
    instance_id: str,
    security: SecuritySettings | None = None,
) -> WorkflowGetResultOutput:
    """workflow_get_result: the output, the live state, or the stored error."""
    run = await _own_run(db, ctx, instance_id)
    _disclosed(run, ctx, security, disclosure.RESULT)
    return result_document(run, _started(await _compensation(db, ctx.host_id, run)))


async def wait_result(
    db: Database,
    ctx: InvocationContext,
    instance_id: str,
    wait_ms: int = MAX_WAIT_MS,
    security: SecuritySettings | None = None,
) -> WorkflowGetResultOutput:
    """workflow_wait_result: a bounded long poll (<= 20 s and the run's deadline)."""
    run = await _own_run(db, ctx, instance_id)
    # Refused before waiting: the ceiling never changes, nor does this call's authorization.
    _disclosed(run, ctx, security, disclosure.RESULT)
    if run.state in LIVE_STATES:
        remaining = int((run.deadline_ts - datetime.now(UTC)).total_seconds() * 1000)
        if run.cancellation_policy != "disabled":
            wait_ms = min(wait_ms, max(remaining, 0))
        await wait_run(db, ctx.host_id, run.process_id, wait_ms)
        run = await _own_run(db, ctx, instance_id)
    return result_document(run, _started(await _compensation(db, ctx.host_id, run)))


async def cancel(db: Database, ctx: InvocationContext, instance_id: str) -> WorkflowCancelOutput:
    """workflow_cancel: cancel per the run's cancellation policy."""
    run = await _own_run(db, ctx, instance_id)
    outcome = await cancel_run(db, ctx.host_id, run.process_id, cancelled_by_caller())
    if outcome == "disabled":
        raise WorkflowError(
            "WORKFLOW_POLICY_DENIED",
            "the run's cancellation policy is disabled: it cannot be cancelled",
        )
    if outcome == "effect":
        raise WorkflowError(
            "WORKFLOW_STATE_CONFLICT",
            "the run has dispatched an effect; its before-effects-only policy lets it finish",
            after_effect=True,
            workflow_instance_id=run.process_id,
        )
    run = await _own_run(db, ctx, instance_id)
    return WorkflowCancelOutput(
        workflow_instance_id=run.process_id, result=outcome, state=run.state
    )
