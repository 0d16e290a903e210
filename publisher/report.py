"""The result table, the progress display and the --status listing."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO

from publisher.ledger import Ledger
from publisher.outcomes import ToolOutcome

BAR_WIDTH = 24


class ProgressDisplay:
    """A progress bar redrawn in place on a terminal; one plain line per step otherwise."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.total = max(total, 1)
        self.done = 0
        self.terminal = stream.isatty()

    def __call__(self, line: str) -> None:
        """Report the step about to run."""
        self.done = min(self.done + 1, self.total)
        if not self.terminal:
            print(f"publish: {line}", file=self.stream, flush=True)
            return
        filled = BAR_WIDTH * self.done // self.total
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        text = f"\r[{bar}] {self.done}/{self.total} {line}"[:120]
        self.stream.write(text.ljust(121))
        self.stream.flush()

    def finish(self) -> None:
        """End the bar's line."""
        if self.terminal:
            self.stream.write("\r" + " " * 121 + "\r")
            self.stream.flush()


def outcome_text(outcome: ToolOutcome) -> str:
    """The result column of one Tool."""
    if outcome.status == "published":
        return "Published" + (" (unchanged)" if outcome.detail == "unchanged" else "")
    if outcome.status == "pending-approval":
        reason = (
            f" ({outcome.detail})" if outcome.detail not in ("", "published", "unchanged") else ""
        )
        return f"Waiting for approval from {outcome.owner}{reason}"
    label = {"failed": "Failed", "error": "Refused, unconfirmed", "unconfirmed": "Unconfirmed"}
    text = f"{label[outcome.status]}: {outcome.code}: {outcome.message}"
    if outcome.hint:
        text += f"\n    fix: {outcome.hint}"
    return text


def render_table(outcomes: Sequence[ToolOutcome]) -> str:
    """Tool name and result, one row per Tool."""
    width = max([len("TOOL"), *(len(o.tool) for o in outcomes)])
    lines = [f"{'TOOL'.ljust(width)}  RESULT"]
    for outcome in outcomes:
        lines.append(f"{outcome.tool.ljust(width)}  {outcome_text(outcome)}")
    return "\n".join(lines)


def _age(seconds: float) -> str:
    minutes = int(max(0.0, time.time() - seconds) // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m ago" if minutes >= 60 else f"{minutes}m ago"


def render_status(ledger: Ledger) -> str:
    """What Workflow has not confirmed: pending syncs and operations."""
    lines: list[str] = []
    for row in ledger.data.syncs.values():
        if not row.pending:
            continue
        acknowledged = "none" if row.acknowledged_revision is None else row.acknowledged_revision
        line = (
            f"sync pending  {row.kind} {row.subject}: desired revision {row.desired_revision}, "
            f"acknowledged revision {acknowledged}"
        )
        if row.last_error:
            line += f" (last error: {row.last_error})"
        lines.append(line)
    for operation in ledger.unconfirmed():
        error = operation.error or {}
        line = (
            f"unconfirmed   {operation.tool_name} {operation.subject}: operationId "
            f"{operation.operation_id}, sent {_age(operation.created_at)}"
        )
        if error:
            line += f" (last answer: {error.get('code')}: {error.get('message')})"
        lines.append(line)
    for name, ack in sorted(ledger.data.tools.items()):
        lines.append(
            f"acknowledged  {name}: {ack.status} at aggregate version {ack.aggregate_version}, "
            f"bindingDigest {ack.binding_digest or '-'}"
        )
    if not any(line.startswith(("sync pending", "unconfirmed")) for line in lines):
        lines.insert(0, "nothing unconfirmed")
    return "\n".join(lines)


def stderr() -> TextIO:
    """Where progress goes (kept apart from the table on stdout)."""
    return sys.stderr
