"""Map a faulted run to the stable error registry with a normalized, safe message."""

from __future__ import annotations

from typing import Any

from runtime.engine.problems import standard_kind
from runtime.engine.state import EffectState
from runtime.errors import WorkflowError


def _details(problem: dict[str, Any]) -> dict[str, Any]:
    keys = ("type", "status", "instance", "expression")
    return {key: problem[key] for key in keys if key in problem}


def map_fault(problem: dict[str, Any], effect_state: EffectState) -> WorkflowError:
    """WORKFLOW_INPUT_INVALID, WORKFLOW_TIMEOUT (run deadline) or WORKFLOW_TASK_FAILED."""
    after_effect = effect_state != "none"
    instance = str(problem.get("instance", "/"))
    kind = standard_kind(problem.get("type")) or "custom"
    if instance == "/input" and kind == "validation":
        return WorkflowError(
            "WORKFLOW_INPUT_INVALID",
            "the workflow input does not satisfy the input schema",
            status="failed",
            details=_details(problem),
        )
    if instance == "/" and kind == "timeout":
        return WorkflowError(
            "WORKFLOW_TIMEOUT",
            "the run deadline expired",
            status="timeout",
            retryable=not after_effect,
            after_effect=after_effect,
            details=_details(problem),
        )
    # Only the kind, status and task pointer: titles and details may carry run data. An engine
    # expression fault also names its expression and why (definition text, no run data).
    article = "an" if kind[0] in "aeiou" else "a"
    message = f"task {instance} failed with {article} {kind} error (status {problem.get('status')})"
    expression = problem.get("expression")
    if kind == "expression" and isinstance(expression, str):
        message = f"{message}: expression {expression!r}: {problem.get('detail')}"
    return WorkflowError(
        "WORKFLOW_TASK_FAILED",
        message,
        status="failed",
        after_effect=after_effect,
        details=_details(problem),
    )


def output_error(problem: dict[str, Any], effect_state: EffectState) -> WorkflowError:
    """The public result could not be built or validated."""
    if effect_state != "none":
        return WorkflowError(
            "WORKFLOW_OUTPUT_INVALID_AFTER_EFFECT",
            "the public result is invalid after an externally visible effect; do not repeat",
            status="failed",
            retryable=False,
            after_effect=True,
            details=_details(problem),
        )
    return WorkflowError(
        "WORKFLOW_OUTPUT_INVALID",
        "the public result does not satisfy the workflow output schema",
        status="failed",
        details=_details(problem),
    )
