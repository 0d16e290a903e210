"""The mcp-router.yml format: what the publisher writes, the Gateway reads back unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.router import (
    RoutedTool,
    RouterError,
    RouterSnapshot,
    load_snapshot,
    parse_snapshot,
    render_snapshot,
    write_snapshot,
)

DIGEST = "sha256:" + "ab" * 32
TOOL = RoutedTool(
    name="claim_summary",
    stable_tool_ref="0198a3c2-0000-4000-8000-000000000001",
    workflow_definition_id="0198a3c2-0000-4000-8000-000000000002",
    workflow_version="1.0.0",
    definition_digest=DIGEST,
    binding_digest=DIGEST,
    input_schema={"type": "object"},
    sync_wait_ms=15000,
)


def test_a_written_snapshot_reads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "mcp-router.yml"
    write_snapshot(path, RouterSnapshot(tools=(TOOL,)))
    assert load_snapshot(path) == RouterSnapshot(tools=(TOOL,))
    assert "stableToolRef: 0198a3c2" in path.read_text(encoding="utf-8")


def test_binding_digest_is_optional_and_a_missing_file_is_empty(tmp_path: Path) -> None:
    lines = render_snapshot(RouterSnapshot(tools=(TOOL,))).splitlines(keepends=True)
    text = "".join(line for line in lines if "bindingDigest" not in line)
    assert parse_snapshot(text).tools[0].binding_digest is None
    assert load_snapshot(tmp_path / "absent.yml") == RouterSnapshot()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (("name: claim_summary", "name: workflow_invoke"), "reserved"),
        (("syncWaitMs: 15000", "syncWaitMs: 0"), "syncWaitMs"),
        (("workflowVersion: 1.0.0", "workflowVersion: 1.0.0\n  colour: red"), "colour"),
        ((f"definitionDigest: {DIGEST}", "definitionDigest: md5:1"), "definitionDigest"),
    ],
)
def test_a_bad_snapshot_is_refused_naming_the_field(change: tuple[str, str], named: str) -> None:
    text = render_snapshot(RouterSnapshot(tools=(TOOL,))).replace(*change)
    with pytest.raises(RouterError, match=named):
        parse_snapshot(text)


def test_two_tools_with_one_name_are_refused() -> None:
    text = render_snapshot(RouterSnapshot(tools=(TOOL, TOOL)))
    with pytest.raises(RouterError, match="repeated"):
        parse_snapshot(text)
