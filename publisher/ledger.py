"""The local operation ledger DIR/.publish/ledger.json (seed 000 "Lost receipts").

Two kinds of records:

- a sync row per definition and kind (``definition`` head, ``grants`` set): the desired
  revision and content digest, and the revision and digest Workflow last acknowledged, which
  only move forward;
- an operation per mutating call (definition publish, binding publish): its operationId, the
  exact request, and its state. ``pending`` until Workflow answers for that operationId:
  a receipt makes it ``acknowledged``; only a proven rejection (VERSION_CONFLICT, or
  request-validation evidence naming this operation) makes it ``failed``. Everything else
  (transport, authentication, an unproven error) keeps it pending, and the next run resends
  the same request with the same operationId. Retry never edits the stored request.

The Tool's acknowledged binding (aggregate version, digests, status) moves forward only: a
late receipt for an older aggregate version is ignored. Writes are atomic (a temporary file
renamed over the old one), so a crash leaves either the old or the new ledger.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import msgspec

LEDGER_VERSION = 1
# An unconfirmed operation is never resent after 29 days (Workflow keeps receipts for 30).
EXPIRY_SECONDS = 29 * 24 * 3600
OperationState = Literal["pending", "acknowledged", "failed", "expired"]
OperationKind = Literal["definition", "binding", "rollback"]


class SyncRow(msgspec.Struct, rename="camel", kw_only=True):
    """Desired and acknowledged revision of one definition's head or grant set."""

    kind: Literal["definition", "grants"]
    subject: str
    wf_def_id: str
    desired_revision: int = 0
    desired_content: str | None = None
    acknowledged_revision: int | None = None
    acknowledged_digest: str | None = None
    acknowledged_content: str | None = None
    last_error: str | None = None
    # The definition owner this ledger saved (kept when a spec names none and another user runs)
    owner: dict[str, str] | None = None

    @property
    def pending(self) -> bool:
        """True while Workflow has not acknowledged the desired revision."""
        return self.acknowledged_revision is None or (
            self.acknowledged_revision < self.desired_revision
            or self.acknowledged_content != self.desired_content
        )


class Operation(msgspec.Struct, rename="camel", kw_only=True):
    """One mutating call and what is known of its outcome."""

    operation_id: str
    kind: OperationKind
    subject: str  # the Tool name, or namespace/name@version for a definition publish
    tool_name: str  # the Workflow tool called
    request: dict[str, Any]
    request_digest: str
    state: OperationState = "pending"
    created_at: float = msgspec.field(default_factory=time.time)
    updated_at: float = msgspec.field(default_factory=time.time)
    receipt: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class ToolAck(msgspec.Struct, rename="camel", kw_only=True):
    """The newest binding receipt Workflow gave for one Tool."""

    tool_id: str
    aggregate_version: int
    status: str
    binding_id: str
    binding_digest: str
    definition_digest: str
    workflow_version: str
    request_digest: str | None = None


class LedgerData(msgspec.Struct, rename="camel", kw_only=True):
    """The whole file."""

    version: int = LEDGER_VERSION
    syncs: dict[str, SyncRow] = msgspec.field(default_factory=dict)
    operations: list[Operation] = msgspec.field(default_factory=list)
    tools: dict[str, ToolAck] = msgspec.field(default_factory=dict)


class LedgerBusy(RuntimeError):
    """Another publish holds the directory's ledger."""


@contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold DIR/.publish/lock for one run, so two runs never interleave their ledger writes."""
    path = directory / ".publish" / "lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LedgerBusy(f"another workflow-mcp publish is running on {directory}") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class Ledger:
    """The ledger of one publish directory; every change is saved at once."""

    def __init__(self, path: Path, data: LedgerData) -> None:
        self.path = path
        self.data = data

    @classmethod
    def open(cls, directory: Path) -> Ledger:
        """The ledger under directory/.publish (empty when there is none yet)."""
        path = directory / ".publish" / "ledger.json"
        if not path.exists():
            return cls(path, LedgerData())
        return cls(path, msgspec.json.decode(path.read_bytes(), type=LedgerData))

    def save(self) -> None:
        """Write the ledger atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(msgspec.to_builtins(self.data), indent=2, sort_keys=True) + "\n"
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        with partial.open("w", encoding="utf-8") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        partial.replace(self.path)

    # --- sync rows ----------------------------------------------------------------------------

    def sync_row(
        self, kind: Literal["definition", "grants"], subject: str, wf_def_id: str
    ) -> SyncRow:
        """The row of (kind, wfDefId), created on first use."""
        key = f"{kind}:{wf_def_id}"
        row = self.data.syncs.get(key)
        if row is None:
            row = SyncRow(kind=kind, subject=subject, wf_def_id=wf_def_id)
            self.data.syncs[key] = row
        return row

    def desire(self, row: SyncRow, content: str) -> int:
        """Record the content to deliver; the revision moves up only when the content changed."""
        if row.desired_content != content:
            row.desired_revision = max(row.desired_revision, row.acknowledged_revision or 0) + 1
            row.desired_content = content
        self.save()
        return row.desired_revision

    def raise_above(self, row: SyncRow, applied: int) -> int:
        """Move the desired revision above the one Workflow holds (a rebuilt or lost ledger)."""
        row.desired_revision = max(row.desired_revision, applied) + 1
        self.save()
        return row.desired_revision

    def acknowledge_sync(self, row: SyncRow, revision: int, digest: str, content: str) -> bool:
        """Store Workflow's acknowledgement if it is not older than the held one."""
        if row.acknowledged_revision is not None and revision < row.acknowledged_revision:
            return False
        row.acknowledged_revision, row.acknowledged_digest = revision, digest
        row.acknowledged_content = content
        row.last_error = None
        self.save()
        return True

    def sync_failed(self, row: SyncRow, message: str) -> None:
        """Keep the row pending with the error it met."""
        row.last_error = message
        self.save()

    # --- operations ---------------------------------------------------------------------------

    def pending(self, kind: OperationKind, subject: str) -> list[Operation]:
        """The unconfirmed operations of one subject, oldest first."""
        return [
            op
            for op in self.data.operations
            if op.kind == kind and op.subject == subject and op.state == "pending"
        ]

    def begin(
        self,
        kind: OperationKind,
        subject: str,
        tool_name: str,
        request: dict[str, Any],
        request_digest: str,
    ) -> Operation:
        """A new operation with a fresh operationId, stored before anything is sent."""
        operation_id = str(uuid.uuid4())
        stored = dict(request, operationId=operation_id)
        operation = Operation(
            operation_id=operation_id,
            kind=kind,
            subject=subject,
            tool_name=tool_name,
            request=stored,
            request_digest=request_digest,
        )
        self.data.operations.append(operation)
        self.save()
        return operation

    def expired(self, operation: Operation, now: float | None = None) -> bool:
        """Mark (and report) an unconfirmed operation past its 29 days: it is never resent."""
        if (now if now is not None else time.time()) - operation.created_at < EXPIRY_SECONDS:
            return False
        operation.state = "expired"
        self.save()
        return True

    def settle(
        self,
        operation: Operation,
        state: OperationState,
        *,
        receipt: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        """Record an answer: acknowledged or failed close it; pending keeps the last error."""
        if operation.state != "pending":
            return
        operation.state = state
        operation.updated_at = time.time()
        if receipt is not None:
            operation.receipt = receipt
        operation.error = error
        self.save()

    def unconfirmed(self) -> list[Operation]:
        """Every pending operation."""
        return [op for op in self.data.operations if op.state == "pending"]

    # --- binding acknowledgements -------------------------------------------------------------

    def acknowledge_tool(self, name: str, ack: ToolAck) -> bool:
        """Keep the receipt unless an equal-or-newer aggregate version is already held.

        An equal version replaces the held one (the same head read again, for example after
        the owner's approval), an older one is a late receipt and is ignored.
        """
        held = self.data.tools.get(name)
        if held is not None and ack.aggregate_version < held.aggregate_version:
            return False
        self.data.tools[name] = ack
        self.save()
        return True
