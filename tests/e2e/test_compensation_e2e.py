"""Compensation end to end (issue 42 item 1, "Done when"): through POST /mcp with real tokens,
a real service and a local order backend. A three-write order whose third write fails has its
first two undone in reverse order, each exactly once, also when the service is killed (kill -9)
while compensating and restarted; a run ended by its deadline does the same; status and result
report the compensation while the run keeps its original error; a cancelled run too."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import EVIDENCE, HOST, OWNER, new_id
from tests.support.compensation import ORDER_INPUT, OrderBackend, order_tasks
from tests.support.execution import serving
from tests.support.gateway import entry, run_gateway, write_tools
from tests.support.invocation import client, ok, publish_tool, save_head
from tests.support.live_tools import invoke, publish_live_tool
from tests.support.mcp import McpTestClient
from tests.support.server import LiveServer, free_port, run_server
from tests.support.waiting import wait_until

PATHS = ("reserve", "charge", "ship", "release", "refund")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.requirement("001:Idempotency And Side Effects"),
]


def _order_yaml(base: str, timeout: str = "PT10M") -> str:
    # A start run that calls out states a deadline its token covers (runtime.admission.start).
    document = {
        "document": {
            "dsl": "1.0.3", "namespace": "claims", "name": "summarize-claim", "version": "1.2.0",
        },
        "timeout": {"after": timeout},
        "do": order_tasks(base),
    }  # fmt: skip
    return yaml.safe_dump(document, sort_keys=False)


async def _start(owner: McpTestClient, caller: McpTestClient, text: str) -> str:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, text)
    started = ok(
        await caller.call_tool("workflow_start", {"wfDefId": wf_def_id, "input": ORDER_INPUT})
    )
    return str(started["workflowInstanceId"])


async def _status(caller: McpTestClient, instance: str) -> dict[str, Any]:
    return ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))


async def _settled(caller: McpTestClient, instance: str) -> dict[str, Any]:
    async def settled() -> bool:
        compensation = (await _status(caller, instance)).get("compensation")
        return compensation is not None and compensation["state"] != "running"

    await wait_until(settled, what="the compensation settled", within_s=60)
    return await _status(caller, instance)


def _kill(server: LiveServer) -> None:
    assert server.process is not None
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()


def _allow(monkeypatch: pytest.MonkeyPatch, backend: OrderBackend, faults: str = "") -> None:
    monkeypatch.setenv("WORKFLOW_EXECUTION_OUTBOUND_HTTP_ALLOWLIST", json.dumps([backend.base]))
    monkeypatch.setenv("WORKFLOW_FAULTS", faults)
    # Tools publish plain-http targets of the local backend.
    schemes = json.dumps(["http", "https"])
    monkeypatch.setenv("WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_SCHEMES", schemes)


def _steps(status: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(s["task"], s["state"], s["attempts"]) for s in status["compensation"]["steps"]]


async def test_a_failed_order_is_undone_in_reverse_order_once_across_a_kill_9(
    database_url: str,
    live_identity: DevIdentity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    async with serving(OrderBackend(failing={"ship": 500})) as backend:
        # The first service dies right after refund went out and was ledgered.
        _allow(monkeypatch, backend, "compensation_step_ran_0=kill")
        with run_server(database_url, tmp_path / "first", live_identity) as first:
            async with httpx.AsyncClient(base_url=first.base_url, timeout=60.0) as http:
                owner = client(http, live_identity, OWNER)
                caller = client(http, live_identity)
                instance = await _start(owner, caller, _order_yaml(backend.base))
                await wait_until(
                    lambda: "refund" in backend.paths(), what="refund sent", within_s=60
                )
                assert first.process is not None
                await wait_until(
                    lambda: first.process is not None and first.process.poll() is not None,
                    what="the service killed at its fault point",
                    within_s=30,
                )
                assert first.process.returncode == -signal.SIGKILL
        assert backend.paths() == ["reserve", "charge", "ship", "refund"]
        _allow(monkeypatch, backend)
        with run_server(database_url, tmp_path / "second", live_identity) as second:
            async with httpx.AsyncClient(base_url=second.base_url, timeout=60.0) as http:
                caller = client(http, live_identity)
                status = await _settled(caller, instance)
                handle = {"workflowInstanceId": instance}
                result = await caller.call_tool("workflow_get_result", handle)
    assert backend.paths() == ["reserve", "charge", "ship", "refund", "release"]
    assert backend.body_of("release") == {"reservation": "reserve-1", "sku": "sku-7"}
    assert status["state"] == "FAILED" and status["effectState"] == "confirmed"
    # The run keeps its original error: the failed shipment.
    assert status["error"]["code"] == "WORKFLOW_TASK_FAILED"
    assert status["compensation"]["state"] == "completed"
    assert _steps(status) == [("charge", "completed", 1), ("reserve", "completed", 1)]
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["code"] == "WORKFLOW_TASK_FAILED"
    assert error["details"]["compensation"] == status["compensation"]


async def test_a_run_ended_by_its_deadline_is_undone_through_the_service(
    database_url: str,
    live_identity: DevIdentity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # charge answers after the run's deadline: the write is left to finish, nothing new starts.
    async with serving(OrderBackend(slow={"charge": 3.0})) as backend:
        _allow(monkeypatch, backend)
        with run_server(database_url, tmp_path, live_identity) as server:
            async with httpx.AsyncClient(base_url=server.base_url, timeout=60.0) as http:
                owner = client(http, live_identity, OWNER)
                caller = client(http, live_identity)
                instance = await _start(owner, caller, _order_yaml(backend.base, "PT2S"))
                status = await _settled(caller, instance)
    assert backend.paths() == ["reserve", "charge", "refund", "release"]
    assert status["state"] == "CANCELLED"
    assert status["error"]["code"] == "WORKFLOW_TIMEOUT"
    assert _steps(status) == [("charge", "completed", 1), ("reserve", "completed", 1)]


async def test_a_cancelled_order_is_undone_through_the_service(
    database_url: str,
    live_identity: DevIdentity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A write Tool whose runs stop between steps when cancelled (cooperative); charge is slow,
    # so the cancel lands while it is in flight: it finishes, then nothing new starts.
    async with serving(OrderBackend(slow={"charge": 2.0})) as backend:
        _allow(monkeypatch, backend)
        document = {
            "document": {
                "dsl": "1.0.3", "namespace": "claims", "name": "summarize-claim",
                "version": "1.2.0",
            },
            "input": {"schema": {"format": "json", "document": {"type": "object"}}},
            "do": order_tasks(backend.base, evidence=EVIDENCE),
        }  # fmt: skip
        text = yaml.safe_dump(document, sort_keys=False)
        targets = tuple(f"{backend.base}/{path}" for path in PATHS)
        with run_server(database_url, tmp_path, live_identity) as server:
            async with httpx.AsyncClient(base_url=server.base_url, timeout=60.0) as http:
                owner = client(http, live_identity, OWNER)
                caller = client(http, live_identity)
                tool = await publish_live_tool(
                    owner, text, targets, write=True, cancellationPolicy="cooperative",
                    syncWaitMs=500,
                )  # fmt: skip
                waited = await invoke(caller, tool, ORDER_INPUT)
                # The sync wait ends first: the answer names the run to re-attach to.
                instance = waited["structuredContent"]["workflowInstanceId"]
                await wait_until(lambda: "charge" in backend.paths(), what="charge sent")
                handle = {"workflowInstanceId": instance}
                cancel = ok(await caller.call_tool("workflow_cancel", handle))
                assert cancel["result"] == "cancellationRequested", cancel
                status = await _settled(caller, instance)
    assert backend.paths() == ["reserve", "charge", "refund", "release"]
    assert status["state"] == "CANCELLED"
    assert status["error"]["code"] == "WORKFLOW_CANCELLED"
    assert _steps(status) == [("charge", "completed", 1), ("reserve", "completed", 1)]


async def test_a_write_of_unknown_outcome_is_reported_not_compensated_through_the_service(
    database_url: str,
    live_identity: DevIdentity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    async with serving(OrderBackend()) as backend:
        # The service dies right after reserve went out, before it was confirmed.
        _allow(monkeypatch, backend, "after_effect_dispatch=kill")
        with run_server(database_url, tmp_path / "first", live_identity) as first:
            async with httpx.AsyncClient(base_url=first.base_url, timeout=60.0) as http:
                owner = client(http, live_identity, OWNER)
                caller = client(http, live_identity)
                instance = await _start(owner, caller, _order_yaml(backend.base))
                await wait_until(
                    lambda: first.process is not None and first.process.poll() is not None,
                    what="the service killed at its fault point",
                    within_s=30,
                )
        _allow(monkeypatch, backend)
        with run_server(database_url, tmp_path / "second", live_identity) as second:
            async with httpx.AsyncClient(base_url=second.base_url, timeout=60.0) as http:
                status = await _settled(client(http, live_identity), instance)
    # The reclaimed run does not send reserve again, and its release is not guessed either.
    assert backend.paths() == ["reserve"]
    assert status["state"] == "FAILED" and status["effectState"] == "possible"
    [step] = status["compensation"]["steps"]
    assert (step["task"], step["state"]) == ("reserve", "skipped")
    assert "outcome is unknown" in step["error"]


async def test_a_compensations_mcp_call_goes_through_the_reference_gateway_as_its_own_action(
    database_url: str,
    live_identity: DevIdentity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # reserve is undone by an MCP call of the workflow-backed Tool orders.release, sent to the
    # real reference Gateway (`workflow-mcp gateway`, its own process) as Workflow's Gateway.
    gateway_port = free_port()
    router = tmp_path / "mcp-router.yml"
    write_tools(router)
    (tmp_path / "workflow").mkdir()
    async with serving(OrderBackend(failing={"ship": 500})) as backend:
        _allow(monkeypatch, backend)
        gateway_mcp = f"http://127.0.0.1:{gateway_port}/mcp"
        monkeypatch.setenv("WORKFLOW_EXECUTION_OUTBOUND_GATEWAY_MCP_URL", gateway_mcp)
        with (
            run_server(database_url, tmp_path / "workflow", live_identity) as server,
            run_gateway(
                tmp_path / "gateway", live_identity, server.mcp_url, router, host_id=HOST,
                port=gateway_port,
            ),
        ):  # fmt: skip
            async with httpx.AsyncClient(base_url=server.base_url, timeout=60.0) as http:
                owner = client(http, live_identity, OWNER)
                caller = client(http, live_identity)
                release = await publish_tool(owner, toolName="orders.release")
                write_tools(router, entry(release, "orders.release", input_schema=_ANY))
                tasks = order_tasks(backend.base)
                undo = {"call": "mcp", "with": {"tool": "orders.release", "arguments": {}}}
                tasks[0]["reserve"]["compensate"] = undo
                wf_def_id = new_id()
                await save_head(owner, wf_def_id, _document_yaml(tasks))
                await _grant(owner, wf_def_id, release.tool_id)
                started = ok(
                    await caller.call_tool(
                        "workflow_start", {"wfDefId": wf_def_id, "input": ORDER_INPUT}
                    )
                )
                instance = str(started["workflowInstanceId"])
                status = await _settled(caller, instance)
        permits = await _permits(database_url, instance)
    # The refund went to the backend; the release left as MCP calls through the Gateway (its
    # ACL let the run's user token through), each under a permit of the compensation run,
    # never of the ended run. The reference Gateway forwards a call that names an action as a
    # nested workflow_invoke (parentActionId), which Workflow refuses until the action
    # dispatch exists (issue 40 X-12): a refusal its error registry calls not retryable, so the
    # step fails visibly at once with that code (no retry would be let through), and no root
    # run of orders.release starts.
    assert backend.paths() == ["reserve", "charge", "ship", "refund"]
    assert status["state"] == "FAILED" and status["error"]["code"] == "WORKFLOW_TASK_FAILED"
    assert status["compensation"]["state"] == "failed"
    charge, reserve = status["compensation"]["steps"]
    assert (charge["task"], charge["state"]) == ("charge", "completed")
    assert (reserve["task"], reserve["state"], reserve["attempts"]) == ("reserve", "failed", 1)
    assert reserve["error"].startswith("WORKFLOW_POLICY_DENIED: ")
    assert "orders.release" in reserve["error"]
    compensation_run = permits["compensation"]
    assert [row[0] for row in permits["rows"]] == [compensation_run]
    assert {row[1] for row in permits["rows"]} == {"orders.release"}
    assert permits["roots"] == 0
    nested = "tools/call workflow_invoke WORKFLOW_POLICY_DENIED"
    assert server.log_path.read_text(encoding="utf-8").count(nested) == 1


_ANY: dict[str, Any] = {"type": "object"}


def _document_yaml(tasks: list[dict[str, Any]]) -> str:
    document = {
        "document": {
            "dsl": "1.0.3", "namespace": "claims", "name": "summarize-claim", "version": "1.2.0",
        },
        "timeout": {"after": "PT10M"},
        "do": tasks,
    }  # fmt: skip
    return yaml.safe_dump(document, sort_keys=False)


async def _grant(owner: McpTestClient, wf_def_id: str, tool_id: str) -> None:
    grant = {
        "grantId": new_id(), "toolId": tool_id, "toolVersion": "1.0.0",
        "lightapiDigest": "sha256:" + "a" * 64, "allowedEnvironments": ["dev", "prod"],
    }  # fmt: skip
    args = {
        "hostId": HOST, "wfDefId": wf_def_id, "sourceRevision": 1, "actor": "steve",
        "grants": [grant],
    }  # fmt: skip
    assert ok(await owner.call_tool("workflow_definition_grants_sync", args))["result"] == "saved"


async def _permits(database_url: str, instance: str) -> dict[str, Any]:
    """The compensation run of instance, the permits recorded for instance and its
    compensation, and the root runs of orders.release (none may have started)."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT compensation_process_id::text FROM workflow_compensation WHERE process_id = %s",
            (instance,),
        )
        row = await cursor.fetchone()
        assert row is not None
        cursor = await conn.execute(
            "SELECT process_id::text, tool_name FROM workflow_action_permit"
            " WHERE process_id IN (%s, %s)",
            (instance, row[0]),
        )
        rows = await cursor.fetchall()
        cursor = await conn.execute(
            "SELECT count(*) FROM workflow_process p JOIN workflow_tool_binding_t b"
            " ON b.host_id = p.host_id AND b.binding_id = p.binding_id"
            " WHERE b.tool_name = 'orders.release'"
        )
        roots = await cursor.fetchone()
    return {"compensation": row[0], "rows": rows, "roots": roots[0] if roots else 0}
