"""The result table and the --status listing."""

from __future__ import annotations

import io
from pathlib import Path

from publisher.ledger import Ledger
from publisher.outcomes import ToolOutcome
from publisher.report import ProgressDisplay, render_status, render_table


def test_each_outcome_reads_as_the_seed_words_it_with_a_fix_for_errors() -> None:
    table = render_table(
        [
            ToolOutcome("a.published", "published"),
            ToolOutcome("b.same", "published", detail="unchanged"),
            ToolOutcome("c.waiting", "pending-approval", owner="alice"),
            ToolOutcome("d.failed", "failed", code="VERSION_CONFLICT", message="m"),
            ToolOutcome("e.lost", "unconfirmed", code="TRANSPORT", message="reset"),
        ]
    )
    rows = table.splitlines()
    assert rows[1].split(None, 1)[1] == "Published"
    assert rows[2].endswith("Published (unchanged)")
    assert rows[3].endswith("Waiting for approval from alice")
    assert "Failed: VERSION_CONFLICT: m" in rows[4] and rows[5].strip().startswith("fix:")
    assert "Unconfirmed: TRANSPORT: reset" in rows[6] and "rerun" in rows[7]


def test_status_shows_the_revision_gap_and_unconfirmed_operations(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path)
    row = ledger.sync_row("grants", "n/w", "wf")
    ledger.desire(row, "c1")
    ledger.acknowledge_sync(row, 1, "sha256:g", "c1")
    ledger.desire(row, "c2")
    operation = ledger.begin("binding", "n.w", "workflow_binding_publish", {}, "d")
    text = render_status(Ledger.open(tmp_path))
    assert "sync pending  grants n/w: desired revision 2, acknowledged revision 1" in text
    assert f"operationId {operation.operation_id}" in text


def test_progress_is_plain_lines_outside_a_terminal() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, 2)
    display("workflow_binding_publish a")
    display.finish()
    assert stream.getvalue() == "publish: workflow_binding_publish a\n"
