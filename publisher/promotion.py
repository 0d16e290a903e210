"""`publish --rollback TOOL` and the drift part of `publish --status` (issue 42 items 2 and 3).

A rollback is one workflow_binding_rollback call kept in the ledger like any mutating call (a
lost receipt is resent with its operationId by the next rollback of the Tool), pinned by the
bindingDigest this directory last acknowledged. Its receipt moves the Tool's acknowledged
binding, and the Tool's router entry is rebuilt from the restored revision as Workflow stores it
(its schemas, wait and annotations, not the directory's newer spec), keeping the entry's roles.

`--status` asks workflow_binding_get for the drift of every Tool the ledger acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.router import DEFAULT_ROLES, RoutedTool, load_snapshot, write_snapshot
from publisher.client import Answer, TransportFailure, WorkflowClient
from publisher.ledger import Ledger, Operation, ToolAck
from publisher.payloads import Actor, request_digest
from publisher.routes import merge
from publisher.spec import DEFAULT_RUNTIME_BOUNDS


class RollbackRefused(Exception):
    """Workflow refused the rollback (or cannot be asked): the message says why."""

    def __init__(self, message: str, *, transport: bool = False) -> None:
        super().__init__(message)
        self.transport = transport


def _call(client: WorkflowClient, tool: str, arguments: dict[str, Any]) -> Answer:
    try:
        return client.call(tool, arguments)
    except TransportFailure as failure:
        raise RollbackRefused(f"no answer from Workflow: {failure}", transport=True) from None


def _refusal(answer: Answer) -> RollbackRefused:
    return RollbackRefused(f"{answer.code}: {answer.message}")


def binding_head(client: WorkflowClient, host_id: str, tool_id: str) -> dict[str, Any]:
    """workflow_binding_get of a Tool: its head, active revision (or the one shown) and drift."""
    answer = _call(client, "workflow_binding_get", {"hostId": host_id, "toolId": tool_id})
    if answer.kind != "receipt" or answer.receipt is None:
        raise _refusal(answer)
    return answer.receipt


def _active_revision(head: dict[str, Any]) -> dict[str, Any]:
    """The active revision of a workflow_binding_get answer (shown, or beside a pending one)."""
    active_id = head.get("activeBindingId")
    for key in ("revision", "activeRevision"):
        revision = head.get(key) or {}
        if active_id is not None and revision.get("bindingId") == active_id:
            return dict(revision)
    raise RollbackRefused("the Tool has no active revision to roll back")


def rolled_back_entry(
    binding: dict[str, Any], receipt: dict[str, Any], roles: tuple[str, ...]
) -> RoutedTool:
    """The Gateway entry of the restored revision, served to roles."""
    effects = binding["toolAnnotations"]
    hints: dict[str, Any] = {
        "readOnlyHint": bool(effects["readOnly"]),
        "destructiveHint": bool(effects["destructive"]),
    }
    if "idempotent" in effects:
        hints["idempotentHint"] = bool(effects["idempotent"])
    bounds = binding.get("runtimeBounds") or {}
    return RoutedTool(
        name=binding["toolName"],
        stable_tool_ref=receipt["toolId"],
        workflow_definition_id=binding["wfDefId"],
        workflow_version=receipt["workflowVersion"],
        definition_digest=receipt["definitionDigest"],
        binding_digest=receipt["bindingDigest"],
        description=binding.get("toolDescription", ""),
        input_schema=binding.get("inputSchema") or {"type": "object"},
        output_schema=binding.get("outputSchema"),
        invocation_mode="sync",
        sync_wait_ms=int(binding["syncWaitMs"]),
        result_text_mode=binding["resultTextMode"],
        maximum_request_bytes=int(
            bounds.get("maximumRequestBytes", DEFAULT_RUNTIME_BOUNDS["maximumRequestBytes"])
        ),
        roles=roles,
        annotations=hints,
    )


@dataclass
class RollbackResult:
    """What a rollback did: the receipt and the router it rewrote."""

    receipt: dict[str, Any]
    entry: RoutedTool
    notes: list[str] = field(default_factory=list)


def _send(ledger: Ledger, client: WorkflowClient, operation: Operation) -> Answer:
    try:
        answer = client.call(operation.tool_name, operation.request)
    except TransportFailure as failure:
        error = {"code": "TRANSPORT", "message": str(failure)}
        ledger.settle(operation, "pending", error=error)
        raise RollbackRefused(f"no answer from Workflow: {failure}", transport=True) from None
    if answer.kind == "receipt":
        ledger.settle(operation, "acknowledged", receipt=answer.receipt)
    elif answer.kind == "tool-error":
        # Workflow answered: a refused rollback changed nothing (the next one is new work).
        ledger.settle(operation, "failed", error=answer.error)
    else:
        ledger.settle(operation, "pending", error=answer.error)
    return answer


def _rollback_answer(
    ledger: Ledger, client: WorkflowClient, name: str, arguments: dict[str, Any]
) -> Answer:
    """Resend this Tool's unconfirmed rollback if there is one, else send a new one."""
    for operation in ledger.pending("rollback", name):
        if not ledger.expired(operation):
            return _send(ledger, client, operation)
    digest = request_digest(arguments)
    operation = ledger.begin("rollback", name, "workflow_binding_rollback", arguments, digest)
    return _send(ledger, client, operation)


def rollback(
    ledger: Ledger,
    client: WorkflowClient,
    actor: Actor,
    *,
    name: str,
    tool_id: str | None,
    reason: str,
    router_path: Path,
    repins: tuple[str, ...] = (),
    spec_roles: tuple[str, ...] | None = None,
) -> RollbackResult:
    """Roll the Tool back, acknowledge the receipt and rewrite its router entry.

    The entry keeps the roles of the Tool's previous entry, else the spec's, else the default.
    """
    held = ledger.data.tools.get(name)
    tool_id = tool_id or (held.tool_id if held is not None else None)
    if tool_id is None:
        raise RollbackRefused(f"{name} is neither in the directory nor in its ledger")
    expected = held.binding_digest if held is not None and held.binding_digest else None
    if expected is None:
        head = binding_head(client, actor.host_id, tool_id)
        expected = str(_active_revision(head)["bindingDigest"])
    arguments: dict[str, Any] = {
        "hostId": actor.host_id,
        "toolId": tool_id,
        "expectedBindingDigest": expected,
        "comment": reason,
    }
    if repins:
        arguments["repinBindingIds"] = list(repins)
    answer = _rollback_answer(ledger, client, name, arguments)
    if answer.kind != "receipt" or answer.receipt is None:
        raise _refusal(answer)
    receipt = answer.receipt
    ledger.acknowledge_tool(
        name,
        ToolAck(
            tool_id=tool_id,
            aggregate_version=int(receipt["aggregateVersion"]),
            status=str(receipt["status"]),
            binding_id=str(receipt["bindingId"]),
            binding_digest=str(receipt["bindingDigest"]),
            definition_digest=str(receipt["definitionDigest"]),
            workflow_version=str(receipt["workflowVersion"]),
        ),
    )
    binding = _active_revision(binding_head(client, actor.host_id, tool_id))["binding"]
    snapshot = load_snapshot(router_path)
    previous = next((entry for entry in snapshot.tools if entry.name == name), None)
    roles = previous.roles if previous is not None else (spec_roles or DEFAULT_ROLES)
    entry = rolled_back_entry(binding, receipt, roles)
    write_snapshot(router_path, merge(snapshot, {entry.name: entry}))
    notes = [
        f"the directory still pins what was rolled back from; a publish run would promote it "
        f"again unless {name}'s spec pins version {receipt['workflowVersion']}"
    ]
    return RollbackResult(receipt, entry, notes)


@dataclass
class DriftLine:
    """One Tool's drift as `--status` lists it."""

    tool: str
    kind: str
    subject: str
    message: str


def ledger_drift(ledger: Ledger, client: WorkflowClient, host_id: str) -> list[DriftLine]:
    """The drift of every Tool the ledger acknowledged, as Workflow reports it now."""
    found: list[DriftLine] = []
    for name, ack in sorted(ledger.data.tools.items()):
        if not ack.tool_id or ack.status != "active":
            continue
        drift = binding_head(client, host_id, ack.tool_id).get("drift") or {}
        for item in drift.get("items", []):
            if item.get("contractChange") == "compatible":
                continue  # a pinned Tool moved compatibly: listed by binding_get, no drift
            found.append(DriftLine(name, item["kind"], item["subject"], item["message"]))
    return found
