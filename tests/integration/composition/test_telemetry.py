"""Traces, metrics and logs of tools/call through POST /mcp, down to the outbound HTTP call."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from runtime.admission.sampler import sample_once
from runtime.collaborators import Services
from tests.support.execution import LocalServer, serving
from tests.support.invocation import invoke_args, ok, publish_tool, refused, until_settled
from tests.support.log_scan import SCAN
from tests.support.mcp import McpTestClient
from tests.support.telemetry import (
    ENDPOINT_REF,
    publish_fetching_tool,
    recorded_spans,
    samples,
    value,
)

GATEWAY_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
GATEWAY_PARENT = f"00-{GATEWAY_TRACE}-00f067aa0ba902b7-01"


@pytest.fixture
def local_targets(services: Services) -> None:
    """Let bindings name http://127.0.0.1 endpoint targets (the local backend)."""
    services.settings.publication.destinations.allowed_schemes = ["http", "https"]


@pytest.mark.requirement("001:Observability And Audit")
async def test_one_trace_runs_from_the_gateways_tools_call_to_the_backend_it_calls(
    owner: McpTestClient, caller: McpTestClient, workers: object, local_targets: None
) -> None:
    backend = LocalServer()
    async with serving(backend):
        tool = await publish_fetching_tool(owner, backend.base)
        with recorded_spans() as spans:
            result = await until_settled(
                lambda: caller.call_tool(
                    "workflow_invoke", invoke_args(tool), headers={"traceparent": GATEWAY_PARENT}
                )
            )
            assert ok(result)["status"] == "completed"
            finished = spans.get_finished_spans()
    names = {
        span.name for span in finished if format(span.context.trace_id, "032x") == GATEWAY_TRACE
    }
    assert {"tools/call", "workflow.admission", "workflow.task", "outbound.http"} <= names
    outbound = next(span for span in finished if span.name == "outbound.http")
    assert outbound.attributes is not None
    assert outbound.attributes["workflow.endpoint_ref"] == ENDPOINT_REF
    # The backend received the same trace, with the outbound span as its parent.
    [request] = [r for r in backend.requests if r["path"] == "/claims"]
    version, trace_id, parent_id, _ = request["headers"]["traceparent"].split("-")
    assert (version, trace_id) == ("00", GATEWAY_TRACE)
    assert parent_id == format(outbound.context.span_id, "016x")


@pytest.mark.requirement("001:Observability And Audit")
async def test_an_error_result_names_the_calls_correlation_id_which_is_its_trace_id(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    tool = await publish_tool(owner)
    args = invoke_args(tool, expectedDefinitionDigest="sha256:" + "0" * 64)
    result = await caller.call_tool(
        "workflow_invoke", args, headers={"traceparent": GATEWAY_PARENT}
    )
    refused(result, "WORKFLOW_DEFINITION_MISMATCH")
    assert result["structuredContent"]["error"]["details"]["correlationId"] == GATEWAY_TRACE
    # Without a Gateway trace the service starts one: still a 32-hex-digit trace id.
    alone = await caller.call_tool("workflow_invoke", args)
    correlation = alone["structuredContent"]["error"]["details"]["correlationId"]
    assert len(correlation) == 32 and correlation != GATEWAY_TRACE
    int(correlation, 16)
    # Publication refusals replay byte for byte by operationId: they carry no call's id.
    denied = await owner.call_tool("workflow_definition_retire", {"hostId": "not-a-host"})
    assert denied["isError"] is True
    assert "correlationId" not in (denied["structuredContent"]["error"].get("details") or {})


@pytest.mark.requirement("001:Observability And Audit")
async def test_metrics_count_calls_by_tool_and_code_and_report_every_family(
    owner: McpTestClient,
    caller: McpTestClient,
    workers: object,
    local_targets: None,
    http: httpx.AsyncClient,
    services: Services,
) -> None:
    backend = LocalServer()
    async with serving(backend):
        tool = await publish_fetching_tool(owner, backend.base)
        before = samples((await http.get("/metrics")).text)
        for _ in range(3):
            ok(await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool))))
        wrong = invoke_args(tool, expectedDefinitionDigest="sha256:" + "0" * 64)
        refused(await caller.call_tool("workflow_invoke", wrong), "WORKFLOW_DEFINITION_MISMATCH")
    await sample_once(services.database, services.admission.estimator)
    reply = await http.get("/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    after = samples(reply.text)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    invoke = {"tool": "workflow_invoke"}
    assert grew("workflow_tool_calls_total", code="ok", **invoke) >= 3
    assert grew("workflow_tool_calls_total", code="WORKFLOW_DEFINITION_MISMATCH", **invoke) == 1
    assert grew("workflow_tool_call_seconds_count", **invoke) >= 4
    assert grew("workflow_admission_seconds_count", operation="invoke") >= 3
    assert grew("workflow_outbound_seconds_count", kind="http", endpoint=ENDPOINT_REF) == 3
    assert grew("workflow_task_service_seconds_count", execution_class="interactive") >= 3
    assert grew("workflow_claim_seconds_count") >= 1
    names = {name for name, _ in after}
    for execution_class in ("interactive", "standard", "batch"):
        labels = (("execution_class", execution_class),)
        for family in (
            "workflow_queue_depth",
            "workflow_queue_oldest_runnable_seconds",
            "workflow_executor_slots_available",
            "workflow_budget_exhaustions_total",
        ):
            assert (family, labels) in after, (family, execution_class)
    assert "workflow_lease_reclaims_total" in names
    assert value(after, "workflow_db_pool_connections", pool="service", state="open") >= 1
    # Bounded labels only: no host id, user or run id anywhere in the exposition.
    label_values = {v for _, labels in after for _, v in labels}
    assert not any(_is_uuid(v) for v in label_values)


@pytest.mark.requirement("001:Observability And Audit")
async def test_log_lines_carry_ids_and_outcomes_but_never_tokens_or_input_values(
    owner: McpTestClient, caller: McpTestClient, workers: object
) -> None:
    marker = f"input-value-{uuid.uuid4().hex}"
    token = caller.auth["Authorization"].removeprefix("Bearer ")
    SCAN.forbid(marker)
    mark = len(SCAN.lines)
    tool = await publish_tool(owner)
    ok(await until_settled(
        lambda: caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": marker}))
    ))  # fmt: skip
    # A refused input, a refused digest and an unknown Tool: error paths log too.
    await caller.call_tool("workflow_invoke", {**invoke_args(tool), "input": marker})
    await caller.call_tool(
        "workflow_invoke", invoke_args(tool, {"claimId": marker}, expectedBindingDigest=marker)
    )
    await caller.call_tool("workflow_invoke", {**invoke_args(tool), "stableToolRef": marker})
    lines = SCAN.since(mark)
    records = [json.loads(line) for line in lines]
    access = [r for r in records if r["logger"] == "workflow.access"]
    invokes = [r for r in access if r.get("tool") == "workflow_invoke"]
    assert len(invokes) == 4, access
    assert all(r["correlation_id"] and "duration_ms" in r and r["outcome"] for r in invokes)
    assert invokes[0]["outcome"] == "ok" and invokes[0]["host_id"]
    assert {r.get("error_code") for r in invokes[1:]} <= {
        "WORKFLOW_INPUT_INVALID", "WORKFLOW_DEFINITION_MISMATCH", "WORKFLOW_NOT_FOUND",
    }  # fmt: skip
    assert not [line for line in lines if marker in line or token in line]
    assert not SCAN.leaks(lines)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
