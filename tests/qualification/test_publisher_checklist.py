"""Seed 000 "Qualification Checklist" items the publisher owns, against real processes.

Workflow runs as a subprocess (tests/support/server.py); `workflow-mcp publish` runs in this
process with its real HTTP client, a lost receipt being a response read and then dropped as
a dead connection would (tests/support/publisher_harness.DropResponses). "The Gateway
snapshot" is the mcp-router.yml the publisher writes.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from publisher.command import EXIT_OK, EXIT_TRANSPORT
from runtime.security.devtools import DEV_HOST_ID, DevIdentity
from tests.support.publisher_harness import (
    AUTHOR,
    OWNER,
    DropResponses,
    as_user,
    call_tool,
    calls_to,
    invoke,
    ledger_of,
    operation,
    publish,
    stub_gateway,
    tools_by_name,
    unique,
    write_logic_tool,
)
from tests.support.server import LiveServer, run_server

GATEWAY_URL_ENV = "WORKFLOW_EXECUTION_OUTBOUND_GATEWAY_MCP_URL"
DIGEST = "sha256:" + "d" * 64


def _nested_tool(directory: Path, namespace: str, *, granted: bool) -> tuple[str, str]:
    """A Tool whose workflow calls the nested Tool accounts.lookup (granted or not)."""
    directory.mkdir(parents=True, exist_ok=True)
    nested_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/accounts.lookup"))
    definition = {
        "document": {"dsl": "1.0.3", "namespace": namespace, "name": "nested", "version": "1.0.0"},
        "do": [
            {
                "lookup": {
                    "call": "mcp",
                    "with": {
                        "endpoint": "https://gateway.example.com/mcp",
                        "tool": "accounts.lookup",
                        "arguments": {},
                    },
                }
            }
        ],
    }
    (directory / "nested.yaml").write_text(yaml.safe_dump(definition), encoding="utf-8")
    spec = {
        "tool": f"{namespace}.nested",
        "workflow": "nested.yaml",
        "dependencies": [
            {
                "nestedToolId": nested_id,
                "nestedToolVersion": "1.0.0",
                "contractDigest": DIGEST,
                "authorizationToolName": "accounts.lookup",
                "dispatchTarget": "accounts.lookup",
                "toolAnnotations": {"readOnly": True, "destructive": False},
            }
        ],
        "grants": [
            {
                "toolId": nested_id,
                "toolVersion": "1.0.0",
                "lightapiDigest": DIGEST,
                "allowedEnvironments": ["dev"],
            }
        ]
        if granted
        else [],
    }
    (directory / "nested.tool.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    return f"{namespace}.nested", nested_id


@pytest.mark.requirement("000:QC-10")
def test_item_10_a_revocation_stays_sync_pending_while_workflow_is_stopped(
    live_database: str,
    live_identity: DevIdentity,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With Workflow stopped, a grant revocation shows "Sync pending" and the Portal and
    Workflow revision gap. Once Workflow returns, a user presses Sync now; subsequent
    dispatches then honor the acknowledged revocation."""
    directory = tmp_path / "tools"
    namespace = f"grants{unique()}"
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    tool, _nested = _nested_tool(directory, namespace, granted=True)
    with stub_gateway() as (gateway_url, nested_calls):
        monkeypatch.setenv(GATEWAY_URL_ENV, gateway_url)
        with run_server(live_database, tmp_path / "first", live_identity) as workflow:
            first = publish(directory, workflow)
            assert first.code == EXIT_OK, first.out + first.err
            entry = tools_by_name(first.router)[tool]
            granted = invoke(workflow, entry, {"attempt": 1})
            assert granted["isError"] is False, granted
            assert len(nested_calls) == 1
            stopped_url = workflow.mcp_url
        _nested_tool(directory, namespace, granted=False)
        stopped = publish(directory, workflow, url=stopped_url)
        assert stopped.code == EXIT_TRANSPORT
        status = publish(directory, workflow, options=("--status",)).out
        assert (
            f"sync pending  grants {namespace}/nested: desired revision 2, "
            "acknowledged revision 1" in status
        ), status
        with run_server(live_database, tmp_path / "second", live_identity) as workflow:
            synced = publish(directory, workflow)
            assert synced.code == EXIT_OK, synced.out + synced.err
            assert "nothing unconfirmed" in publish(directory, workflow, options=("--status",)).out
            refused = invoke(workflow, tools_by_name(synced.router)[tool], {"attempt": 2})
            assert refused["isError"] is True, refused
            assert "no live grant" in str(refused["structuredContent"]), refused
            assert len(nested_calls) == 1


@pytest.mark.requirement("000:QC-11")
def test_item_11_a_lost_receipt_is_unconfirmed_and_only_its_user_retries_it(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """A publish whose receipt is lost is shown as unconfirmed; a retry by the same user with
    the same operationId returns the stored receipt and does not overwrite a newer Portal
    projection. Another user cannot retry it."""
    directory = tmp_path / "tools"
    tool = write_logic_tool(directory, f"lost{unique()}", owner=OWNER)
    dropper = DropResponses(calls_to("workflow_binding_publish"))
    lost = publish(directory, live_server, transport=dropper)
    assert lost.code == EXIT_TRANSPORT and "Unconfirmed" in lost.row(tool)
    [pending] = ledger_of(directory).unconfirmed()
    assert pending.operation_id in publish(directory, live_server, options=("--status",)).out

    other = publish(directory, live_server, user=AUTHOR)
    assert "Refused, unconfirmed" in other.row(tool), other.out
    assert [op.operation_id for op in ledger_of(directory).unconfirmed()] == [pending.operation_id]
    assert tool not in tools_by_name(other.router)

    retried = publish(directory, live_server, user=OWNER)
    assert retried.code == EXIT_OK, retried.out + retried.err
    operation = next(
        op for op in ledger_of(directory).data.operations if op.operation_id == pending.operation_id
    )
    assert operation.state == "acknowledged"
    # The stored receipt of the first send: "published", not a second publish's "unchanged".
    assert operation.receipt is not None and operation.receipt["result"] == "published"
    assert tools_by_name(retried.router)[tool].binding_digest == operation.receipt["bindingDigest"]


@pytest.mark.requirement("000:QC-12")
def test_item_12_a_delayed_receipt_for_n_does_not_replace_n_plus_1(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """When revision N+1 is acknowledged before a delayed receipt for N, the Portal keeps N+1
    and its digest."""
    directory = tmp_path / "tools"
    namespace = f"late{unique()}"
    tool = write_logic_tool(directory, namespace, owner=OWNER)
    publish(directory, live_server, transport=DropResponses(calls_to("workflow_binding_publish")))
    [revision_n] = ledger_of(directory).unconfirmed()

    write_logic_tool(directory, namespace, owner=OWNER, syncWaitMs=15000)
    # Every retry of N is lost again, while N+1 goes through.
    dropper = DropResponses(operation(revision_n.operation_id))
    newer = publish(directory, live_server, transport=dropper)
    assert "Published" in newer.row(tool), newer.out
    held = ledger_of(directory).data.tools[tool]
    assert held.aggregate_version == 2
    assert tools_by_name(newer.router)[tool].sync_wait_ms == 15000

    late = publish(directory, live_server)
    assert late.code == EXIT_OK, late.out + late.err
    ledger = ledger_of(directory)
    delayed = next(o for o in ledger.data.operations if o.operation_id == revision_n.operation_id)
    assert delayed.state == "acknowledged"
    assert delayed.receipt is not None and delayed.receipt["aggregateVersion"] == 1
    kept = ledger.data.tools[tool]
    assert (kept.aggregate_version, kept.binding_digest) == (2, held.binding_digest)
    assert tools_by_name(late.router)[tool].binding_digest == held.binding_digest


@pytest.mark.requirement("000:QC-19")
def test_item_19_a_failed_binding_keeps_its_gateway_entry_and_the_batch_publishes(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """A failed binding publish leaves the previous Gateway entry for that Tool active, and the
    other Tools in the batch are published."""
    directory = tmp_path / "tools"
    bad_namespace, good_namespace = f"bad{unique()}", f"good{unique()}"
    bad = write_logic_tool(directory, bad_namespace, owner=OWNER)
    good = write_logic_tool(directory, good_namespace, owner=OWNER)
    before = tools_by_name(publish(directory, live_server).router)[bad]

    write_logic_tool(directory, bad_namespace, owner=OWNER, totalDeadlineMs=10000)
    write_logic_tool(directory, good_namespace, owner=OWNER, marker="two", version="1.1.0")
    run = publish(directory, live_server)
    assert "Failed: WORKFLOW_INPUT_INVALID" in run.row(bad), run.out
    assert "fix:" in run.out
    assert "Published" in run.row(good)
    routed = tools_by_name(run.router)
    assert routed[bad] == before
    assert routed[good].workflow_version == "1.1.0"
    served = invoke(live_server, routed[bad], {"id": "x"})
    assert served["isError"] is False, served
    assert served["structuredContent"]["output"]["marker"] == "one"


@pytest.mark.requirement("000:QC-22")
def test_item_22_a_non_owners_revision_waits_for_the_owner_and_stays_out_of_the_snapshot(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """A revision published by someone other than the definition owner is pendingApproval, is
    left out of the Gateway snapshot, and becomes active only after the owner approves the
    reviewed digest."""
    namespace = f"review{unique()}"
    owner_dir, author_dir = tmp_path / "owner", tmp_path / "author"
    write_logic_tool(owner_dir, namespace, tool=f"{namespace}.own", owner=OWNER)
    assert publish(owner_dir, live_server, user=OWNER).code == EXIT_OK
    tool = write_logic_tool(author_dir, namespace, tool=f"{namespace}.asked", owner=OWNER)

    asked = publish(author_dir, live_server, user=AUTHOR)
    assert f"Waiting for approval from {OWNER}" in asked.row(tool), asked.out
    assert tool not in tools_by_name(asked.router)
    pending = ledger_of(author_dir).data.tools[tool]
    assert pending.status == "pendingApproval"

    decision = {
        "hostId": DEV_HOST_ID,
        "bindingId": pending.binding_id,
        "expectedBindingDigest": pending.binding_digest,
        "decision": "approve",
        "comment": "reviewed",
        "operationId": str(uuid.uuid4()),
    }
    wrong = dict(decision, expectedBindingDigest=DIGEST, operationId=str(uuid.uuid4()))
    assert call_tool(live_server, "workflow_binding_decide", wrong, as_user(live_server, OWNER))[
        "isError"
    ]
    assert tool not in tools_by_name(publish(author_dir, live_server, user=AUTHOR).router)
    approved = call_tool(
        live_server, "workflow_binding_decide", decision, as_user(live_server, OWNER)
    )
    assert approved["isError"] is False, approved

    served = publish(author_dir, live_server, user=AUTHOR)
    assert "Published" in served.row(tool), served.out
    assert tools_by_name(served.router)[tool].binding_digest == pending.binding_digest
