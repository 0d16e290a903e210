"""Map a faulted run to the stable error registry with a normalized, safe message."""

from __future__ import annotations

import re
from typing import Any

from runtime.engine.run.faults import standard_kind
from runtime.engine.run.state import EffectState
from runtime.errors import WorkflowError, error_registry

# Reasons the runtime itself writes for an outbound failure (runtime.execution.outbound). A
# detail that is exactly one of them is kept in the stored error, because it says what went
# wrong and can hold no response or run data; any other detail may, so it is dropped.
_RUNTIME_REASON = re.compile(
    r"response larger than \d{1,12} bytes|response is not valid JSON|the MCP response is not JSON"
    r"|too many redirects|the (?:HTTP|MCP) call timed out|(?:HTTP|MCP) transport error: \w{1,60}"
    r"|HTTP status \d{3}|the MCP server returned a JSON-RPC error|the MCP response has no result"
    r"|the Gateway refused the call|the MCP call failed|Workflow's service token is unavailable"
    r"|redirect refused: the call does not follow redirects \(HTTP status 3\d\d\)"
    # A secret's name is definition text, never its value (runtime.execution.task_runner).
    r"|the host holds no secret named [A-Za-z][A-Za-z0-9_]{0,62}"
    r"|secret [A-Za-z][A-Za-z0-9_]{0,62} cannot be opened with the keyring"
    r"|secret [A-Za-z][A-Za-z0-9_]{0,62} may not be used by this definition: its scope"
    r" \(workflow_secret_put definitions\) does not name it"
)


# 4xx answers that ask to be tried again later: Request Timeout, Too Early, Too Many Requests
# (and the timeout kind's own status, 408).
_TRY_LATER = (408, 425, 429)


def is_refusal(problem: dict[str, Any]) -> bool:
    """Whether a fault is a refusal the same call cannot outlast by being tried again.

    The answer's own word first: a tool error that carries the error registry's `retryable`
    flag (every Workflow-backed tool's does; call_dispatch keeps it). Otherwise the status says
    whose the fault is, as HTTP does: 4xx the call's (a policy refusal, an authorization or
    authentication refusal, invalid input or an expression, which are the standard kinds that
    default to 4xx), except those asking to come back later; 5xx, a transport failure
    (communication, 500) and a timeout (408) may pass.
    """
    retryable = problem.get("retryable")
    if isinstance(retryable, bool):
        return not retryable
    status = problem.get("status")
    return isinstance(status, int) and 400 <= status < 500 and status not in _TRY_LATER


def fault_code(problem: dict[str, Any]) -> str:
    """The registry code a fault is reported under: a tool error's own, else map_fault's."""
    code = problem.get("code")
    if isinstance(code, str) and code in error_registry():
        return code
    return map_fault(problem, "none").code.value


def runtime_reason(problem: dict[str, Any]) -> str | None:
    """The runtime's own reason for an outbound failure, when the problem carries one."""
    detail = problem.get("detail")
    if isinstance(detail, str) and _RUNTIME_REASON.fullmatch(detail):
        return detail
    return None


def _details(problem: dict[str, Any]) -> dict[str, Any]:
    # forks: every branch's outcome of the forks the fault left (task_kinds.add_branch_outcomes).
    keys = ("type", "status", "instance", "expression", "forks")
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
    # expression fault also names its expression and why (definition text, no run data); an
    # outbound fault keeps the runtime's own reason.
    article = "an" if kind[0] in "aeiou" else "a"
    message = f"task {instance} failed with {article} {kind} error (status {problem.get('status')})"
    expression = problem.get("expression")
    reason = runtime_reason(problem)
    if kind == "expression" and isinstance(expression, str):
        message = f"{message}: expression {expression!r}: {problem.get('detail')}"
    elif reason is not None:
        message = f"{message}: {reason}"
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
