"""The local ledger: sync revisions, operation states, forward-only acknowledgements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from publisher.client import Answer
from publisher.ledger import EXPIRY_SECONDS, Ledger, ToolAck
from publisher.outcomes import proven_rejection

pytestmark = pytest.mark.requirement("000:Lost receipts")


def ack(version: int, digest: str = "b") -> ToolAck:
    """A binding acknowledgement at an aggregate version."""
    return ToolAck(
        tool_id="t", aggregate_version=version, status="active", binding_id="r",
        binding_digest=f"sha256:{digest * 64}", definition_digest="sha256:" + "d" * 64,
        workflow_version="1.0.0",
    )  # fmt: skip


@pytest.mark.requirement("000:QC-12")
def test_a_late_receipt_for_an_older_aggregate_version_is_ignored(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path)
    assert ledger.acknowledge_tool("x", ack(3, "n"))
    assert not ledger.acknowledge_tool("x", ack(2, "o"))
    assert Ledger.open(tmp_path).data.tools["x"].binding_digest == "sha256:" + "n" * 64


@pytest.mark.requirement("000:Synchronization")
def test_sync_revisions_move_only_when_the_content_changes(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path)
    row = ledger.sync_row("grants", "n/w", "wf")
    assert ledger.desire(row, "c1") == 1
    assert ledger.desire(row, "c1") == 1
    assert row.pending
    assert ledger.acknowledge_sync(row, 1, "sha256:g", "c1") and not row.pending
    assert ledger.desire(row, "c2") == 2 and row.pending
    assert not ledger.acknowledge_sync(row, 0, "sha256:old", "c0")
    assert row.acknowledged_revision == 1
    assert ledger.raise_above(row, 7) == 8


def test_an_operation_keeps_its_id_and_request_until_it_is_answered(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path)
    operation = ledger.begin("binding", "x", "workflow_binding_publish", {"a": 1}, "sha256:r")
    ledger.settle(operation, "pending", error={"code": "TRANSPORT", "message": "reset"})
    [again] = Ledger.open(tmp_path).pending("binding", "x")
    assert again.operation_id == operation.operation_id
    assert again.request == {"a": 1, "operationId": operation.operation_id}
    ledger.settle(operation, "acknowledged", receipt={"result": "published"})
    ledger.settle(operation, "failed", error={"code": "LATE"})  # a closed operation stays closed
    assert operation.state == "acknowledged"
    stored = json.loads((tmp_path / ".publish" / "ledger.json").read_text())
    assert stored["operations"][0]["state"] == "acknowledged"


def test_an_unconfirmed_operation_expires_after_29_days(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path)
    operation = ledger.begin("definition", "n/w@1", "workflow_definition_publish", {}, "d")
    assert not ledger.expired(operation, now=operation.created_at + EXPIRY_SECONDS - 1)
    assert ledger.expired(operation, now=operation.created_at + EXPIRY_SECONDS)
    assert operation.state == "expired" and ledger.unconfirmed() == []


def _binding_operation(tmp_path: Path, expected: int = 0) -> object:
    ledger = Ledger.open(tmp_path)
    request = {"expectedAggregateVersion": expected}
    return ledger.begin("binding", "x", "workflow_binding_publish", request, "d")


def test_only_proven_rejections_close_an_operation(tmp_path: Path) -> None:
    operation = _binding_operation(tmp_path)
    op_id = operation.operation_id  # type: ignore[attr-defined]

    def error(code: str, details: object = None, after: bool = False) -> Answer:
        body = {"code": code, "message": "m", "afterEffect": after, "details": details}
        return Answer("tool-error", error=body)

    evidence = {"version": 2, "discriminator": "bindingFields", "operationId": op_id,
                "toolName": "workflow_binding_publish", "requestSection": "binding"}  # fmt: skip
    assert proven_rejection(error("VERSION_CONFLICT", {"aggregateVersion": 3}), operation)  # type: ignore[arg-type]
    assert proven_rejection(
        error("WORKFLOW_INPUT_INVALID", {"requestValidation": evidence}), operation
    )  # type: ignore[arg-type]
    unproven = [
        error("WORKFLOW_INPUT_INVALID"),
        error("WORKFLOW_INPUT_INVALID", {"requestValidation": evidence | {"operationId": "other"}}),
        error("WORKFLOW_INPUT_INVALID", {"requestValidation": evidence | {"extra": 1}}),
        error("WORKFLOW_INPUT_INVALID", {"requestValidation": evidence}, after=True),
        error("WORKFLOW_POLICY_DENIED"),
        error("VERSION_CONFLICT"),
        Answer("protocol-error", error={"code": "HTTP_502", "message": "bad gateway"}),
    ]
    assert not any(proven_rejection(answer, operation) for answer in unproven)  # type: ignore[arg-type]
