"""`workflow-mcp publish` against a real Workflow (a server subprocess on a test database)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from examples.backend import serve
from publisher.command import EXIT_NOT_PUBLISHED, EXIT_OK, EXIT_TRANSPORT, EXIT_USAGE
from runtime.security.devtools import DEV_HOST_ID, DevIdentity
from tests.support.gateway import run_gateway
from tests.support.publisher_harness import (
    AUTHOR,
    OWNER,
    DropResponses,
    calls_to,
    copy_examples,
    http_targets_server,
    invoke,
    ledger_of,
    publish,
    tools_by_name,
    unique,
    write_logic_tool,
)
from tests.support.server import LiveServer, free_port

pytestmark = pytest.mark.requirement("000:Publish ordering")


@pytest.fixture(scope="module")
def workflow(
    live_database: str, live_identity: DevIdentity, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """Workflow in a subprocess that accepts http endpoint targets on loopback (the examples'
    write Tool calls http://127.0.0.1:8790)."""
    directory = tmp_path_factory.mktemp("publisher")
    with http_targets_server(live_database, directory, live_identity) as server:
        yield server


def test_the_examples_publish_and_land_in_the_router(workflow: LiveServer, tmp_path: Path) -> None:
    directory = copy_examples(tmp_path)
    run = publish(directory, workflow)
    assert run.code == EXIT_OK, run.out + run.err
    assert "Published" in run.row("loans.quick-decision")
    assert "Published" in run.row("claims.add-note")
    routed = tools_by_name(run.router)
    assert set(routed) == {"loans.quick-decision", "claims.add-note"}
    acks = ledger_of(directory).data.tools
    for name, entry in routed.items():
        assert entry.binding_digest == acks[name].binding_digest
        assert entry.definition_digest == acks[name].definition_digest
        assert entry.stable_tool_ref == acks[name].tool_id
    assert routed["loans.quick-decision"].input_schema["required"] == ["applicantId", "creditScore"]
    assert routed["claims.add-note"].annotations == {
        "readOnlyHint": False,
        "destructiveHint": False,
    }


@pytest.mark.requirement("000:Status rules")
def test_publishing_twice_is_unchanged(workflow: LiveServer, tmp_path: Path) -> None:
    directory = tmp_path / "tools"
    tool = write_logic_tool(directory, f"twice{unique()}")
    first = publish(directory, workflow)
    second = publish(directory, workflow)
    assert first.code == second.code == EXIT_OK, second.out + second.err
    assert "Published (unchanged)" in second.row(tool)
    assert tools_by_name(first.router)[tool] == tools_by_name(second.router)[tool]
    rows = ledger_of(directory).data.syncs.values()
    assert all(row.acknowledged_revision == 1 for row in rows), rows


@pytest.mark.requirement("000:Workflow owner approval")
def test_a_tool_published_by_a_non_owner_waits_and_stays_out_of_the_router(
    workflow: LiveServer, tmp_path: Path
) -> None:
    namespace = f"owned{unique()}"
    owner_dir, author_dir = tmp_path / "owner", tmp_path / "author"
    write_logic_tool(owner_dir, namespace, tool=f"{namespace}.owners", owner=OWNER)
    assert publish(owner_dir, workflow, user=OWNER).code == EXIT_OK
    tool = write_logic_tool(author_dir, namespace, tool=f"{namespace}.authors", owner=OWNER)
    run = publish(author_dir, workflow, user=AUTHOR)
    assert run.code == EXIT_OK, run.out + run.err
    assert f"Waiting for approval from {OWNER}" in run.row(tool)
    assert tool not in tools_by_name(run.router)
    strict = publish(author_dir, workflow, user=AUTHOR, options=("--strict",))
    assert strict.code == EXIT_NOT_PUBLISHED


def test_a_failed_binding_keeps_its_router_entry_while_others_publish(
    workflow: LiveServer, tmp_path: Path
) -> None:
    directory = tmp_path / "tools"
    good = write_logic_tool(directory, f"good{unique()}")
    bad_namespace = f"bad{unique()}"
    bad = write_logic_tool(directory, bad_namespace)
    first = publish(directory, workflow)
    before = tools_by_name(first.router)[bad]
    # syncWaitMs above totalDeadlineMs: Workflow refuses the binding fields (proven rejection).
    write_logic_tool(directory, bad_namespace, syncWaitMs=20000, totalDeadlineMs=10000)
    write_logic_tool(directory, good.split(".")[0], marker="two", version="1.0.1")
    run = publish(directory, workflow)
    assert run.code == EXIT_OK, run.out + run.err
    assert "Failed: WORKFLOW_INPUT_INVALID" in run.row(bad)
    assert "Published" in run.row(good)
    routed = tools_by_name(run.router)
    assert routed[bad] == before
    assert routed[good].workflow_version == "1.0.1"
    states = {op.state for op in ledger_of(directory).data.operations if op.subject == bad}
    assert "failed" in states


@pytest.mark.requirement("000:Lost receipts")
def test_a_lost_receipt_stays_pending_and_the_rerun_reuses_its_operation_id(
    workflow: LiveServer, tmp_path: Path
) -> None:
    directory = tmp_path / "tools"
    tool = write_logic_tool(directory, f"lost{unique()}")
    dropper = DropResponses(calls_to("workflow_binding_publish"))
    lost = publish(directory, workflow, transport=dropper)
    assert lost.code == EXIT_TRANSPORT
    assert "Unconfirmed" in lost.row(tool)
    assert tool not in tools_by_name(lost.router)
    [pending] = ledger_of(directory).unconfirmed()
    assert (
        pending.request["operationId"] == dropper.dropped[0]["params"]["arguments"]["operationId"]
    )
    status = publish(directory, workflow, options=("--status",))
    assert pending.operation_id in status.out and "unconfirmed" in status.out

    sent: list[dict[str, object]] = []
    watcher = DropResponses(lambda message: sent.append(message) is not None)
    rerun = publish(directory, workflow, transport=watcher)
    assert rerun.code == EXIT_OK, rerun.out + rerun.err
    binds = [m for m in sent if m["params"]["name"] == "workflow_binding_publish"]  # type: ignore[index]
    assert binds[0]["params"]["arguments"] == pending.request  # type: ignore[index]
    operation = next(
        op for op in ledger_of(directory).data.operations if op.operation_id == pending.operation_id
    )
    assert operation.state == "acknowledged"
    assert operation.receipt is not None and operation.receipt["result"] == "published"
    assert tool in tools_by_name(rerun.router)
    assert "nothing unconfirmed" in publish(directory, workflow, options=("--status",)).out


def test_status_calls_nothing_and_exit_codes(workflow: LiveServer, tmp_path: Path) -> None:
    directory = tmp_path / "tools"
    write_logic_tool(directory, f"codes{unique()}")
    down = publish(directory, workflow, url="http://127.0.0.1:9/mcp")
    assert down.code == EXIT_TRANSPORT
    status = publish(directory, workflow, url="http://127.0.0.1:9/mcp", options=("--status",))
    assert status.code == EXIT_OK
    assert "sync pending  definition" in status.out
    assert "desired revision 1, acknowledged revision none" in status.out
    (directory / "broken.yaml").write_text("neither: a definition nor a tool\n", encoding="utf-8")
    assert publish(directory, workflow).code == EXIT_USAGE


def test_the_example_tools_answer_and_the_write_reaches_the_backend_with_the_callers_bearer(
    workflow: LiveServer, tmp_path: Path
) -> None:
    directory = copy_examples(tmp_path)
    port = free_port()
    note = directory / "claim-note.yaml"
    # Another endpoint is another text: a version of its own (published versions are immutable).
    text = note.read_text().replace("127.0.0.1:8790", f"127.0.0.1:{port}")
    note.write_text(text.replace('version: "1.0.0"', f'version: "1.0.{port}"'))
    # A fresh ledger for a definition another run saved: Workflow holds its revision 1.
    assert publish(copy_examples(tmp_path / "first"), workflow).code == EXIT_OK
    refused = publish(directory, workflow)
    assert "Failed: WORKFLOW_IDEMPOTENCY_CONFLICT" in refused.row("claims.add-note"), refused.out
    run = publish(directory, workflow, options=("--adopt-revisions",))
    assert run.code == EXIT_OK, run.out + run.err
    assert "Published" in run.row("claims.add-note"), run.out
    routed = tools_by_name(run.router)
    decision = invoke(workflow, routed["loans.quick-decision"],
                      {"applicantId": "A-1", "creditScore": 720})  # fmt: skip
    assert decision["isError"] is False, decision
    assert decision["structuredContent"]["output"]["decision"] == "APPROVED"
    backend = serve(port)
    try:
        added = invoke(workflow, routed["claims.add-note"], {"claimId": "C-1", "note": "called"})
    finally:
        backend.shutdown()
        backend.server_close()
    assert added["isError"] is False, added
    assert added["structuredContent"]["output"]["addedBy"] == AUTHOR


def test_another_user_rerunning_the_directory_does_not_take_the_definition_over(
    workflow: LiveServer, tmp_path: Path
) -> None:
    directory = tmp_path / "tools"
    tool = write_logic_tool(directory, f"keep{unique()}")
    assert publish(directory, workflow, user=OWNER).code == EXIT_OK
    rerun = publish(directory, workflow, user=AUTHOR)
    assert "Published (unchanged)" in rerun.row(tool), rerun.out
    [row] = [r for r in ledger_of(directory).data.syncs.values() if r.kind == "definition"]
    assert row.owner == {"userId": OWNER} and row.acknowledged_revision == 1


def test_publishing_through_the_gateway_serves_the_examples_from_the_snapshot_it_writes(
    workflow: LiveServer, tmp_path: Path
) -> None:
    directory = copy_examples(tmp_path / "site")
    router_file = directory.parent / "mcp-router.yml"
    identity = workflow.identity
    with run_gateway(
        tmp_path / "gateway", identity, workflow.mcp_url, router_file, host_id=DEV_HOST_ID
    ) as gateway:
        run = publish(directory, workflow, url=gateway.mcp_url, through_gateway=True)
        assert run.code == EXIT_OK, run.out + run.err
        assert "Published" in run.row("loans.quick-decision")
        caller = identity.user_token(host_id=DEV_HOST_ID, user_id=AUTHOR, roles=("genai-admin",))
        headers = {"Authorization": f"Bearer {caller}", "Content-Type": "application/json",
                   "MCP-Protocol-Version": "2025-11-25"}  # fmt: skip
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "loans.quick-decision",
                           "arguments": {"applicantId": "A-9", "creditScore": 650}}}  # fmt: skip

        def answered() -> dict[str, Any] | None:
            reply = httpx.post(gateway.mcp_url, json=call, headers=headers, timeout=30).json()
            result = reply.get("result")
            return result if result and not result.get("isError") else None

        result = _poll(answered)
        # The Gateway serves the workflow's output as the Tool's structuredContent.
        assert result["structuredContent"] == {
            "applicantId": "A-9",
            "decision": "DECLINED",
        }


def _poll(check: Callable[[], dict[str, Any] | None], within_s: float = 15.0) -> dict[str, Any]:
    """The first truthy answer of check (the Gateway reloads its snapshot within 100 ms)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(0.05)
    raise AssertionError(f"no answer within {within_s}s")
