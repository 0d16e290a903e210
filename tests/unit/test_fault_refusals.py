"""Which faults are refusals a retry cannot change (compensation steps fail at once on those).

The classification is the error registry's retryable flag where the answer carries one (a
Workflow-backed tool's error result) and the status otherwise: 4xx refusals, except those asking
to come back later; 5xx, transport failures and timeouts may pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.engine.run import RunLimits, run_workflow
from runtime.engine.run.error_mapping import fault_code, is_refusal
from runtime.engine.run.faults import fault
from tests.support.engine import StubPort, definition

pytestmark = pytest.mark.requirement("001:Idempotency And Side Effects")


@pytest.mark.parametrize(
    ("kind", "status", "refusal"),
    [
        ("authorization", None, True),  # a secret the call's policy reads is missing (403)
        ("authentication", None, True),  # no usable credential (401)
        ("expression", None, True),  # the step's input lacks what it reads (400)
        ("validation", None, True),
        ("communication", 403, True),  # the endpoint (or the Gateway) refused the call
        ("communication", 404, True),
        ("communication", None, False),  # a transport failure (500)
        ("communication", 503, False),
        ("communication", 429, False),  # asked to come back later
        ("communication", 408, False),
        ("timeout", None, False),  # 408
        ("runtime", None, False),
    ],
)
def test_a_4xx_fault_is_a_refusal_and_a_transport_5xx_or_timeout_fault_is_not(
    kind: str, status: int | None, refusal: bool
) -> None:
    assert is_refusal(fault(kind, "/do/0/a", status=status).problem) is refusal


class ToolError(StubPort):
    """Answers every tools/call with this error result."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__()
        self.result = result

    async def call_mcp(self, request: Any) -> dict[str, Any]:
        return self.result


def _tool_error(error: Any) -> dict[str, Any]:
    return {
        "isError": True,
        "content": [],
        "structuredContent": {"status": "rejected", "error": error},
    }


@pytest.mark.parametrize(
    ("error", "refusal", "code"),
    [
        ({"code": "WORKFLOW_POLICY_DENIED", "retryable": False}, True, "WORKFLOW_POLICY_DENIED"),
        (
            {"code": "WORKFLOW_CAPACITY_EXHAUSTED", "retryable": True},
            False,
            "WORKFLOW_CAPACITY_EXHAUSTED",
        ),
        # Not a Workflow error result: the status (500) decides, under the run's own code.
        ({"code": "SOMETHING_ELSE", "retryable": False}, False, "WORKFLOW_TASK_FAILED"),
        ({"code": "WORKFLOW_POLICY_DENIED", "retryable": "no"}, False, "WORKFLOW_TASK_FAILED"),
        ({"code": ["WORKFLOW_POLICY_DENIED"], "retryable": False}, False, "WORKFLOW_TASK_FAILED"),
        ("denied", False, "WORKFLOW_TASK_FAILED"),
    ],
)
async def test_a_tool_error_is_a_refusal_when_its_registry_flag_says_it_is_not_retryable(
    error: Any, refusal: bool, code: str
) -> None:
    call = {"call": "mcp", "with": {"tool": "release", "arguments": {}}}
    outcome = await run_workflow(
        definition([{"undo": call}]), {}, ToolError(_tool_error(error)), RunLimits()
    )
    assert outcome.fault is not None and outcome.fault["status"] == 500
    assert (is_refusal(outcome.fault), fault_code(outcome.fault)) == (refusal, code)
    # The run's own error stays what it was: the tool's answer adds no run data to it.
    assert outcome.error is not None and outcome.error.code == "WORKFLOW_TASK_FAILED"
