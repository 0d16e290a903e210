"""Run rows to public answers: outputs, the stored normalized error, status documents."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from generated.models import (
    Compensation,
    CompensationStep,
    WorkflowGetResultOutput,
    WorkflowGetStatusOutput,
    WorkflowInvokeOutput,
)
from generated.models import WorkflowError as ContractError
from runtime.canonical import timestamp
from runtime.errors import ErrorStatus, WorkflowError, error_code, error_registry
from runtime.execution.compensation_store import CompensationRecord
from runtime.invocation.store import OwnedRun
from runtime.scheduler.errors import TIMEOUT_MESSAGE
from runtime.scheduler.models import RunSnapshot


def not_visible() -> WorkflowError:
    """The one refusal for a run that is unknown, of another host or of another user."""
    return WorkflowError(
        "WORKFLOW_NOT_FOUND", "no workflow instance with this id is visible to the caller"
    )


_COMPENSATION_STATES: dict[str, Literal["running", "completed", "failed"]] = {
    "running": "running",
    "completed": "completed",
    "failed": "failed",
}


def compensation_document(record: CompensationRecord | None) -> Compensation:
    """The compensation of a FAILED or CANCELLED run as status reads show it."""
    if record is None:
        return Compensation(state="not_needed", steps=[])
    steps = [
        CompensationStep(
            task=str(step.get("name") or step.get("task")),
            state=step["state"],
            attempts=int(step.get("attempts", 0)),
            error=step["error"] if step.get("error") else UNSET,
        )
        for step in record.steps
    ]
    return Compensation(state=_COMPENSATION_STATES.get(record.state, "running"), steps=steps)


def stored_error(
    run: RunSnapshot, instance_id: str, compensation: Compensation | None = None
) -> WorkflowError:
    """The run's stored normalized error as a typed error (afterEffect from effect_state).

    With compensation, its details also carry the compensation of the run's writes.
    """
    stored = run.error or {}
    code = stored.get("code")
    if code not in error_registry():
        code = "WORKFLOW_CANCELLED" if run.state == "CANCELLED" else "WORKFLOW_TASK_FAILED"
    message = stored.get("message") or "the workflow run did not complete"
    status: ErrorStatus = "cancelled" if run.state == "CANCELLED" else "failed"
    if code == "WORKFLOW_TIMEOUT":
        status = "timeout"
    retryable = stored.get("retryable")
    details = stored.get("details")
    if compensation is not None:
        kept = details if isinstance(details, dict) else {}
        details = kept | {"compensation": msgspec.to_builtins(compensation)}
    return WorkflowError(
        error_code(str(code)),
        str(message),
        status=status,
        retryable=retryable if isinstance(retryable, bool) else None,
        after_effect=run.effect_state != "none",
        retry_after_ms=stored.get("retryAfterMs"),
        details=details if isinstance(details, dict) else None,
        workflow_instance_id=instance_id,
    )


def still_running(instance_id: str, *, retryable: bool, after_effect: bool) -> WorkflowError:
    """WORKFLOW_TIMEOUT naming the instance: the wait ended without a result."""
    if retryable:
        message = "the run did not finish within the wait; retry to re-attach to it"
    elif after_effect:
        # The dispatched write is not cut off: its result is kept for the replay window.
        message = (
            "the run's deadline passed; a write already dispatched is left to finish and its "
            "result is kept for the replay window"
        )
    else:
        # Word for word the stored end of a run the deadline ended (retryable false either way).
        message = TIMEOUT_MESSAGE
    return WorkflowError(
        "WORKFLOW_TIMEOUT",
        message,
        status="timeout",
        retryable=retryable,
        after_effect=after_effect,
        workflow_instance_id=instance_id,
    )


def state_unknown(instance_id: str) -> WorkflowError:
    """WORKFLOW_INVOCATION_UNAVAILABLE naming the admitted run the database stopped answering for.

    The run exists and may be running, so its effects are unknown: afterEffect is true (an
    effect may have happened since admission; "no effect" would be a guess), and the retry
    it names, with the same key, re-attaches to it rather than starting another.
    """
    return WorkflowError(
        "WORKFLOW_INVOCATION_UNAVAILABLE",
        "the run was admitted but the database became unavailable while waiting for it, so its"
        " state and effects are unknown; call again with the same idempotency key (or input)"
        " to re-attach to it, or workflow_get_status its instance id",
        status="failed",
        retryable=True,
        after_effect=True,
        details={"runState": "unknown"},
        workflow_instance_id=instance_id,
    )


def _public_output(run: RunSnapshot) -> dict[str, Any]:
    output = run.result
    return output if isinstance(output, dict) else {"value": output}


def invoke_output(
    run: RunSnapshot, instance_id: str, definition_digest: str
) -> WorkflowInvokeOutput:
    """workflow_invoke's success, or the stored error of a failed or cancelled run."""
    if run.state != "COMPLETED":
        raise stored_error(run, instance_id)
    return WorkflowInvokeOutput(
        status="completed",
        workflow_instance_id=instance_id,
        definition_digest=definition_digest,
        output=_public_output(run),
    )


def result_document(
    run: OwnedRun, compensation: Compensation | None = None
) -> WorkflowGetResultOutput:
    """workflow_get_result / workflow_wait_result: output when COMPLETED, state when live."""
    instance_id, state = run.process_id, run.state
    if state == "FAILED" or state == "CANCELLED":
        raise stored_error(run, instance_id, compensation)
    return WorkflowGetResultOutput(
        workflow_instance_id=instance_id,
        state=state,
        definition_digest=run.definition_digest,
        output=_public_output(run) if state == "COMPLETED" else UNSET,
    )


def status_document(
    run: OwnedRun,
    open_task_ids: list[str] | None = None,
    compensation: Compensation | None = None,
    *,
    with_result: bool = True,
) -> WorkflowGetStatusOutput:
    """workflow_get_status: state, timestamps, retryability, result or error when terminal.

    with_result: the caller may see the run's result (lifecycle._disclosed).
    """
    instance_id = run.process_id
    state = run.state
    clean_failure = state in ("FAILED", "CANCELLED") and run.effect_state == "none"
    finished = run.finished_ts
    error: ContractError | UnsetType = UNSET
    if state in ("FAILED", "CANCELLED"):
        document = stored_error(run, instance_id).to_structured()["error"]
        error = msgspec.convert(document, ContractError)
    return WorkflowGetStatusOutput(
        workflow_instance_id=instance_id,
        state=state,
        wf_def_id=run.wf_def_id,
        definition_digest=run.definition_digest,
        submitted_at=timestamp(run.created_ts),
        updated_at=timestamp(run.updated_ts),
        deadline_at=timestamp(run.deadline_ts),
        retryable=clean_failure,
        effect_state=run.effect_state,
        finished_at=UNSET if finished is None else timestamp(finished),
        open_task_ids=UNSET if open_task_ids is None else open_task_ids,
        result=_public_output(run) if state == "COMPLETED" and with_result else UNSET,
        error=error,
        compensation=UNSET if compensation is None else compensation,
    )
