"""tools/call of a workflow-backed Tool: ACL, pins, input checks, then workflow_invoke.

Seed 001 "Gateway Execution Flow" and seed 000 "Gateway Changes": the Tool ACL, a Tool whose
snapshot entry has no bindingDigest refused ("republish this Tool"), the arguments validated
against the published input schema and the request-size pre-check before Workflow sees them,
then one workflow_invoke with the HTTP timeout syncWaitMs + 2 s.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from gateway.acl import check_routed
from gateway.caller import Caller
from gateway.relay import WorkflowClient, WorkflowUnreachable
from gateway.results import passed_through, rendered_success
from gateway.router import RoutedTool
from runtime.errors import WorkflowError, policy_denied
from runtime.invocation import SchemaCheck, canonical_input, check_request_bytes, schema_check
from runtime.mcp import ToolOutcome

log = logging.getLogger("workflow.gateway.routed")

# Seed 000 "Waiting, timeout and re-attach": the Gateway waits syncWaitMs plus this margin.
TIMEOUT_MARGIN_S = 2.0
# Seed 000 "Parent action": a running task's call names its action in this header.
ACTION_HEADER = "x-workflow-action"
_ACTION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def unreachable(what: str) -> WorkflowError:
    """WORKFLOW_INVOCATION_UNAVAILABLE: what the Gateway answers for a transport failure only."""
    return WorkflowError(
        "WORKFLOW_INVOCATION_UNAVAILABLE",
        f"Workflow could not be reached or did not answer in time ({what}); retry the call",
        status="failed",
    )


@dataclass(frozen=True)
class PreparedTool:
    """A snapshot Tool with its input schema compiled (once per snapshot, not per call)."""

    tool: RoutedTool
    input_check: SchemaCheck


def prepare(tool: RoutedTool) -> PreparedTool:
    """Compile tool's input schema (patterns on RE2); an unusable one refuses every call."""
    return PreparedTool(tool, schema_check(tool.input_schema, "Tool"))


def check_before_invoke(prepared: PreparedTool, caller: Caller, arguments: dict[str, Any]) -> str:
    """Every Gateway-side refusal, in order; the binding digest to pin when all pass."""
    tool = prepared.tool
    check_routed(caller, tool)
    if tool.binding_digest is None:
        raise WorkflowError(
            "WORKFLOW_START_REJECTED",
            f"{tool.name} has no bindingDigest in the Gateway snapshot: republish this Tool",
        )
    # Workflow's own checks: canonical input, the schema on RE2 (a missing field is named).
    canonical = canonical_input(arguments)
    prepared.input_check.check(arguments)
    if tool.maximum_request_bytes is not None:
        # Measured as Workflow measures it: the canonical input's bytes.
        check_request_bytes(arguments, tool.maximum_request_bytes, canonical=canonical)
    return tool.binding_digest


def parent_action(action: str | None) -> str | None:
    """The parentActionId of a call a running workflow task makes (its x-workflow-action).

    Seed 000 Parent action, step 4: the Gateway calls workflow_invoke with parentActionId, and
    a nested call is never downgraded to a root start; a header that names no action is
    refused here for the same reason.
    """
    if action is None:
        return None
    if _ACTION_ID.fullmatch(action) is None:
        raise policy_denied(
            f"{ACTION_HEADER} does not name a workflow action: a workflow-backed Tool called "
            "from a running workflow is never started as a root run"
        )
    return action


async def call_routed(
    client: WorkflowClient,
    prepared: PreparedTool,
    caller: Caller,
    arguments: dict[str, Any],
    action: str | None = None,
) -> ToolOutcome:
    """Run a workflow-backed Tool for a verified caller (action: its x-workflow-action)."""
    binding_digest = check_before_invoke(prepared, caller, arguments)
    tool = prepared.tool
    invoke = {
        "stableToolRef": tool.stable_tool_ref,
        "expectedBindingDigest": binding_digest,
        "expectedDefinitionDigest": tool.definition_digest,
        "input": arguments,
    }
    parent = parent_action(action)
    if parent is not None:
        # Workflow refuses it until the action dispatch is restored (seed 000 Parent action).
        invoke["parentActionId"] = parent
    timeout_s = tool.sync_wait_ms / 1000 + TIMEOUT_MARGIN_S
    try:
        result = await client.call_tool("workflow_invoke", invoke, caller, timeout_s=timeout_s)
    except WorkflowUnreachable as failure:
        log.warning("workflow_invoke for %s: Workflow unreachable (%s)", tool.name, failure)
        raise unreachable(str(failure)) from None
    if result.get("isError"):
        return passed_through(result)
    structured = result.get("structuredContent")
    return rendered_success(tool, structured if isinstance(structured, dict) else {})
