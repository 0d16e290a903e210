"""Scheduler failures: lease loss (not an Exception) and the stable run errors."""

from __future__ import annotations

from typing import Any, Literal

from runtime.errors import WorkflowError

# The message of every run the deadline ended, whichever path noticed it first (the sweep, the
# reaper, the worker, or a caller re-attaching): a replay must read exactly what the first
# caller read.
TIMEOUT_MESSAGE = "the workflow deadline passed before the run finished"
# Errors that end a run as CANCELLED rather than FAILED: a caller's or operator's cancel, and
# the deadline (seed 000 "Waiting, timeout and re-attach": past deadline_ts Workflow cancels
# the run and reports WORKFLOW_TIMEOUT).
_CANCELLING_CODES = frozenset({"WORKFLOW_CANCELLED", "WORKFLOW_TIMEOUT"})


class LeaseLost(BaseException):
    """The task's lease or fencing token no longer matches: another worker owns it now.

    A BaseException so that task code catching ``Exception`` cannot swallow it and go on
    writing; only the executor catches it.
    """

    def __init__(self, task_id: str, action: str) -> None:
        super().__init__(f"lease on task {task_id} lost before {action}")
        self.task_id = task_id
        self.action = action


def timeout_error(*, after_effect: bool) -> WorkflowError:
    """The stable deadline failure of a run: WORKFLOW_TIMEOUT, never retryable."""
    return WorkflowError(
        "WORKFLOW_TIMEOUT",
        TIMEOUT_MESSAGE,
        status="timeout",
        retryable=False,
        after_effect=after_effect,
    )


def ending_state(error: WorkflowError) -> Literal["FAILED", "CANCELLED"]:
    """The terminal state a run ended with error takes: one state per error, whoever ends it."""
    return "CANCELLED" if error.code in _CANCELLING_CODES else "FAILED"


def cancelled_error(*, after_effect: bool) -> WorkflowError:
    """WORKFLOW_CANCELLED: a cooperative run stopped at its cancellation signal."""
    return WorkflowError(
        "WORKFLOW_CANCELLED",
        "the run was cancelled before its next step",
        status="cancelled",
        retryable=False,
        after_effect=after_effect,
    )


def budget_exhausted(counters: list[str] | None = None) -> WorkflowError:
    """WORKFLOW_BUDGET_EXHAUSTED: a reservation found a remaining counter insufficient."""
    details = {"counters": counters} if counters else None
    return WorkflowError(
        "WORKFLOW_BUDGET_EXHAUSTED",
        "the invocation budget cannot cover this dispatch",
        status="failed",
        details=details,
    )


def uncertain_effect_error(step_no: int) -> WorkflowError:
    """A reclaimed, non-idempotent step whose effect may already have happened."""
    return WorkflowError(
        "WORKFLOW_TASK_FAILED",
        f"step {step_no} may already have taken effect and is not idempotent; not re-dispatched",
        status="failed",
        retryable=False,
        after_effect=True,
    )


def task_failed(message: str = "a workflow task failed") -> WorkflowError:
    """WORKFLOW_TASK_FAILED with a sanitized message (never raw internals)."""
    return WorkflowError("WORKFLOW_TASK_FAILED", message, status="failed")


def agreeing(error: WorkflowError, effect_state: str) -> WorkflowError:
    """error as a run whose effect state is effect_state ends with it: after an effect that
    is confirmed or possible, afterEffect and never retryable.

    Seed 001 Phase 2: "distinguish post-effect output failures as non-retryable and preserve
    their side-effect state in status and audit responses". An error raised before the effect
    state was known (a dropped database connection, say) must not tell a caller that a retry
    is safe or that nothing happened. The fail_process statement applies the same rule to the
    stored error (runtime/scheduler/queries.sql), so every reader gets this one answer.
    """
    if effect_state == "none" or (error.after_effect and not error.retryable):
        return error
    return WorkflowError(
        error.code,
        error.message,
        status=error.status,
        retryable=False,
        after_effect=True,
        retry_after_ms=error.retry_after_ms,
        details=error.details,
        workflow_instance_id=error.workflow_instance_id,
    )


def error_document(error: WorkflowError) -> dict[str, Any]:
    """The error object stored on a run or task (the public error shape)."""
    return dict(error.to_structured()["error"])
