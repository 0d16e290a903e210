"""Publish Selected in the seed's order (seed 000 "Publish ordering").

1. workflow_definition_save per definition (its highest pinned version is the head), then
   workflow_definition_publish per pinned version, then workflow_definition_grants_sync per
   definition;
2. workflow_binding_publish per Tool whose definition steps succeeded;
3. mcp-router.yml from the receipts (publisher.routes).

A transport failure does not stop the run: what it touched stays unconfirmed in the ledger
and the rest is still attempted (each call fails fast when Workflow is down).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.router import RoutedTool, load_snapshot, write_snapshot
from publisher.client import Answer, TransportFailure, WorkflowClient
from publisher.ledger import Ledger, Operation, OperationKind, SyncRow, ToolAck
from publisher.outcomes import ToolOutcome, proven_rejection
from publisher.payloads import (
    Actor,
    binding_arguments,
    grant_set,
    grants_arguments,
    owner_document,
    publish_arguments,
    request_digest,
    save_arguments,
    save_content,
)
from publisher.routes import ActiveReceipt, merge, routed_tool
from publisher.spec import Definition, PublishDir, Tool, definition_owner
from runtime.canonical import canonical_digest

Progress = Callable[[str], None]
RECEIPT_FIELDS = frozenset(
    {"aggregateVersion", "status", "bindingId", "bindingDigest", "definitionDigest"}
    | {"workflowVersion"}
)


@dataclass
class StepResult:
    """The outcome of a definition step: None when it succeeded."""

    failure: ToolOutcome | None = None


@dataclass
class RunResult:
    """Every Tool's outcome and whether any call went unanswered."""

    outcomes: list[ToolOutcome] = field(default_factory=list)
    transport_failed: bool = False
    router_path: Path | None = None


def _failure(status: str, answer: Answer | None, transport: str | None = None) -> ToolOutcome:
    outcome = ToolOutcome(tool="", status="error")
    if transport is not None:
        outcome.status, outcome.code, outcome.message = "unconfirmed", "TRANSPORT", transport
    elif answer is not None:
        outcome.status = "failed" if status == "failed" else "error"
        outcome.code, outcome.message = answer.code, answer.message
    return outcome


class Publisher:
    """One run over a PublishDir."""

    def __init__(
        self,
        found: PublishDir,
        ledger: Ledger,
        client: WorkflowClient,
        actor: Actor,
        *,
        progress: Progress | None = None,
        adopt_revisions: bool = False,
    ) -> None:
        self.found = found
        self.ledger = ledger
        self.client = client
        self.actor = actor
        self.progress = progress or (lambda _line: None)
        self.adopt_revisions = adopt_revisions
        self.transport_failed = False

    # --- calls --------------------------------------------------------------------------------

    def _call(self, tool: str, arguments: dict[str, Any]) -> Answer | str:
        """The answer, or the transport failure's text."""
        try:
            return self.client.call(tool, arguments)
        except TransportFailure as failure:
            self.transport_failed = True
            return str(failure)

    def _send(self, operation: Operation) -> tuple[Answer | None, str | None]:
        """Send (or resend) an operation's stored request; settle what the answer proves."""
        answer = self._call(operation.tool_name, operation.request)
        if isinstance(answer, str):
            self.ledger.settle(operation, "pending", error={"code": "TRANSPORT", "message": answer})
            return None, answer
        if answer.kind == "receipt":
            self.ledger.settle(operation, "acknowledged", receipt=answer.receipt)
        elif proven_rejection(answer, operation):
            self.ledger.settle(operation, "failed", error=answer.error)
        else:
            self.ledger.settle(operation, "pending", error=answer.error)
        return answer, None

    def _operation(
        self, kind: OperationKind, subject: str, tool_name: str, arguments: dict[str, Any]
    ) -> tuple[Operation | None, Answer | None, str | None]:
        """Resolve this subject's unconfirmed operations, then send the request unless one of
        them already carried exactly this request (that one is the answer)."""
        digest = request_digest(arguments)
        latest: tuple[Operation | None, Answer | None, str | None] = (None, None, None)
        for operation in self.ledger.pending(kind, subject):
            if self.ledger.expired(operation):
                # Never resent after 29 days; this run's request is new work (seed 000).
                continue
            self.progress(f"retry {operation.tool_name} {subject} ({operation.operation_id})")
            answer, transport = self._send(operation)
            if operation.request_digest == digest:
                latest = (operation, answer, transport)
        if latest[0] is not None:
            return latest
        operation = self.ledger.begin(kind, subject, tool_name, arguments, digest)
        self.progress(f"{tool_name} {subject}")
        answer, transport = self._send(operation)
        return operation, answer, transport

    # --- definition steps ---------------------------------------------------------------------

    def _sync(self, row: SyncRow, content: str, send: Callable[[int], Answer | str]) -> StepResult:
        """Deliver one sync row (save or grant set) under the sourceRevision rules."""
        revision = self.ledger.desire(row, content)
        for _attempt in range(2):
            answer = send(revision)
            if isinstance(answer, str):
                self.ledger.sync_failed(row, f"transport: {answer}")
                return StepResult(_failure("error", None, transport=answer))
            receipt = answer.receipt or {}
            details = (answer.error or {}).get("details") or {}
            applied = receipt.get("appliedRevision", details.get("appliedRevision"))
            behind = answer.kind == "receipt" and receipt.get("result") == "stale"
            conflict = answer.code == "WORKFLOW_IDEMPOTENCY_CONFLICT"
            if answer.kind == "receipt" and not behind:
                digest = str(receipt.get("definitionDigest") or receipt.get("grantsDigest"))
                self.ledger.acknowledge_sync(row, int(receipt["appliedRevision"]), digest, content)
                return StepResult()
            # Grants are ours to number; a definition head only with --adopt-revisions.
            may_raise = row.kind == "grants" or self.adopt_revisions
            if (behind or conflict) and isinstance(applied, int) and may_raise:
                revision = self.ledger.raise_above(row, applied)
                continue
            if behind:
                message = (
                    f"Workflow holds revision {applied} of {row.subject}'s {row.kind}, "
                    f"above this ledger's {revision}"
                )
                answer = Answer(
                    "tool-error",
                    error={"code": "WORKFLOW_IDEMPOTENCY_CONFLICT", "message": message},
                )
            self.ledger.sync_failed(row, f"{answer.code}: {answer.message}")
            # A refused save or grant set changed nothing (the revision rules say so).
            return StepResult(_failure("failed", answer))
        return StepResult(_failure("error", None, transport="revision kept moving"))

    def _save_content(self, head: Definition) -> tuple[SyncRow, dict[str, Any]]:
        row = self.ledger.sync_row("definition", head.key, head.wf_def_id)
        owner = self._owner(head.key)
        row.owner = owner
        return row, save_content(head, owner)

    def _grants_content(self, key: str, wf_def_id: str) -> tuple[SyncRow, list[dict[str, Any]]]:
        return self.ledger.sync_row("grants", key, wf_def_id), grant_set(self.found.tools, key)

    def record_desires(self, heads: dict[str, Definition]) -> None:
        """Record every desired revision before any call, as the Portal commits a change before
        delivering it: a delivery that fails leaves the gap visible in --status."""
        for key, head in heads.items():
            row, content = self._save_content(head)
            self.ledger.desire(row, canonical_digest(content))
            grants_row, grants = self._grants_content(key, head.wf_def_id)
            self.ledger.desire(grants_row, canonical_digest(grants))

    def _save(self, head: Definition) -> StepResult:
        row, content = self._save_content(head)

        def send(revision: int) -> Answer | str:
            self.progress(f"workflow_definition_save {head.key} revision {revision}")
            return self._call(
                "workflow_definition_save", save_arguments(self.actor, head, content, revision)
            )

        return self._sync(row, canonical_digest(content), send)

    def _owner(self, key: str) -> dict[str, str]:
        """The spec's definitionOwner, else the owner this ledger saved, else the acting user."""
        declared = definition_owner(self.found.tools, key)
        if declared is not None:
            return owner_document(declared, self.actor)
        for row in self.ledger.data.syncs.values():
            if row.kind == "definition" and row.subject == key and row.owner is not None:
                return dict(row.owner)
        return owner_document(None, self.actor)

    def _publish_version(self, definition: Definition) -> StepResult:
        owner = self._owner(definition.key)
        subject = f"{definition.key}@{definition.version}"
        _op, answer, transport = self._operation(
            "definition",
            subject,
            "workflow_definition_publish",
            publish_arguments(self.actor, definition, owner),
        )
        if transport is not None or answer is None:
            return StepResult(_failure("error", None, transport=transport or "expired"))
        if answer.kind != "receipt":
            return StepResult(_failure("error", answer))
        status = (answer.receipt or {}).get("status")
        if status != "active":
            retired = Answer(
                "tool-error",
                error={
                    "code": "WORKFLOW_DEFINITION_RETIRED",
                    "message": f"{subject} is {status} in Workflow",
                },
            )
            return StepResult(_failure("failed", retired))
        return StepResult()

    def _grants(self, key: str, wf_def_id: str) -> StepResult:
        row, grants = self._grants_content(key, wf_def_id)

        def send(revision: int) -> Answer | str:
            self.progress(f"workflow_definition_grants_sync {key} revision {revision}")
            return self._call(
                "workflow_definition_grants_sync",
                grants_arguments(self.actor, wf_def_id, grants, revision),
            )

        return self._sync(row, canonical_digest(grants), send)

    # --- bindings -----------------------------------------------------------------------------

    def _expected_version(self, tool: Tool) -> int:
        held = self.ledger.data.tools.get(tool.name)
        return 0 if held is None else held.aggregate_version

    def _acknowledge(self, tool: Tool, receipt: dict[str, Any], digest: str) -> bool:
        ack = ToolAck(
            tool_id=tool.tool_id,
            aggregate_version=int(receipt["aggregateVersion"]),
            status=str(receipt["status"]),
            binding_id=str(receipt["bindingId"]),
            binding_digest=str(receipt["bindingDigest"]),
            definition_digest=str(receipt["definitionDigest"]),
            workflow_version=str(receipt["workflowVersion"]),
            request_digest=digest,
        )
        return self.ledger.acknowledge_tool(tool.name, ack)

    def _acknowledge_retries(self, tool: Tool, subject_ops: list[Operation]) -> None:
        for operation in subject_ops:
            if operation.state == "acknowledged" and operation.receipt is not None:
                self._acknowledge(tool, operation.receipt, operation.request_digest)

    def _bind(self, tool: Tool) -> tuple[ToolOutcome, RoutedTool | None]:
        arguments = binding_arguments(self.actor, tool)
        retried = self.ledger.pending("binding", tool.name)
        for _attempt in range(2):
            request = dict(arguments, expectedAggregateVersion=self._expected_version(tool))
            operation, answer, transport = self._operation(
                "binding", tool.name, "workflow_binding_publish", request
            )
            self._acknowledge_retries(tool, retried)
            if transport is not None or answer is None or operation is None:
                return _named(tool, _failure("error", None, transport=transport or "expired")), None
            if answer.kind == "receipt":
                receipt = answer.receipt or {}
                if not set(receipt) >= RECEIPT_FIELDS:
                    malformed = Answer(
                        "protocol-error",
                        error={"code": "MALFORMED_RECEIPT", "message": "a receipt lacks fields"},
                    )
                    return _named(tool, _failure("error", malformed)), None
                if self._acknowledge(tool, receipt, operation.request_digest):
                    return self._bound(tool, arguments, receipt)
                # A late receipt (an older aggregate version than the one held): send anew.
                continue
            if answer.code == "VERSION_CONFLICT" and operation.state == "failed":
                held = ((answer.error or {}).get("details") or {}).get("aggregateVersion")
                if isinstance(held, int) and held != request["expectedAggregateVersion"]:
                    self._adopt_head(tool, held)
                    continue
            status = "failed" if operation.state == "failed" else "error"
            return _named(tool, _failure(status, answer)), None
        return _named(tool, _failure("error", None, transport="head kept moving")), None

    def _adopt_head(self, tool: Tool, aggregate_version: int) -> None:
        # Proven by Workflow's VERSION_CONFLICT: the head is at this version now.
        held = self.ledger.data.tools.get(tool.name)
        if held is None:
            self.ledger.data.tools[tool.name] = ToolAck(
                tool_id=tool.tool_id,
                aggregate_version=aggregate_version,
                status="unknown",
                binding_id="",
                binding_digest="",
                definition_digest="",
                workflow_version="",
            )
        elif aggregate_version > held.aggregate_version:
            held.aggregate_version = aggregate_version
        self.ledger.save()

    def _bound(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        receipt: dict[str, Any],
    ) -> tuple[ToolOutcome, RoutedTool | None]:
        owner = self._owner(tool.definition.key)
        detail = str(receipt.get("result", ""))
        if receipt.get("status") != "active":
            reason = receipt.get("carryOverDeniedReason")
            outcome = ToolOutcome(
                tool.name,
                "pending-approval",
                detail=str(reason or detail),
                owner=owner["userId"],
            )
            return outcome, None
        active = ActiveReceipt(
            binding_digest=str(receipt["bindingDigest"]),
            definition_digest=str(receipt["definitionDigest"]),
            workflow_version=str(receipt["workflowVersion"]),
        )
        entry = routed_tool(tool, arguments["binding"], active)
        return ToolOutcome(tool.name, "published", detail=detail), entry

    # --- the run ------------------------------------------------------------------------------

    def run(self, router_path: Path) -> RunResult:
        """Publish every Tool of the directory and write the router snapshot."""
        result = RunResult(router_path=router_path)
        pinned = {t.definition.key: t.definition for t in self.found.tools}
        heads = {k: v for k, v in self.found.heads().items() if k in pinned}
        self.record_desires(heads)
        blocked: dict[str, ToolOutcome] = {}
        for key, head in heads.items():
            step = self._save(head)
            if step.failure is not None:
                blocked[key] = step.failure
        versions = {
            (t.definition.key, t.definition.version): t.definition for t in self.found.tools
        }
        version_failures: dict[tuple[str, str], ToolOutcome] = {}
        for (key, version), definition in sorted(versions.items()):
            if key in blocked:
                continue
            step = self._publish_version(definition)
            if step.failure is not None:
                version_failures[(key, version)] = step.failure
        for key in sorted(heads):
            if key in blocked:
                continue
            step = self._grants(key, heads[key].wf_def_id)
            if step.failure is not None:
                blocked[key] = step.failure
        active: dict[str, RoutedTool] = {}
        for tool in self.found.tools:
            failure = blocked.get(tool.definition.key) or version_failures.get(
                (tool.definition.key, tool.definition.version)
            )
            if failure is not None:
                result.outcomes.append(_named(tool, failure))
                continue
            outcome, entry = self._bind(tool)
            result.outcomes.append(outcome)
            if entry is not None:
                active[entry.name] = entry
        write_snapshot(router_path, merge(load_snapshot(router_path), active))
        result.transport_failed = self.transport_failed
        return result


def _named(tool: Tool, outcome: ToolOutcome) -> ToolOutcome:
    return ToolOutcome(
        tool.name, outcome.status, outcome.detail, outcome.code, outcome.message, outcome.owner
    )
