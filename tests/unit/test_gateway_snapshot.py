"""SnapshotWatcher: checks the file at most once per interval; bad files keep the last good."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.router import RouterError
from gateway.snapshot import SnapshotWatcher

ENTRY = """\
version: 1
tools:
- name: {name}
  stableToolRef: 0198a3c2-0000-7000-8000-000000000001
  workflowDefinitionId: 0198a3c2-0000-7000-8000-000000000002
  workflowVersion: 1.2.0
  definitionDigest: sha256:{digest}
  inputSchema: {{type: object}}
  syncWaitMs: 20000
"""


def snapshot_text(name: str) -> str:
    """A one-Tool snapshot."""
    return ENTRY.format(name=name, digest="d" * 64)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def names(watcher: SnapshotWatcher) -> list[str]:
    """The names the watcher serves now."""
    return [tool.name for tool in watcher.current().tools]


@pytest.mark.requirement("000:Gateway Changes")
def test_a_change_is_seen_after_the_interval_and_a_bad_file_keeps_the_last_good(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp-router.yml"
    path.write_text(snapshot_text("a.tool"), encoding="utf-8")
    clock = Clock()
    watcher = SnapshotWatcher(path, interval_s=0.5, clock=clock)
    assert names(watcher) == ["a.tool"]
    path.write_text(snapshot_text("b.tool"), encoding="utf-8")
    clock.now += 0.4
    assert names(watcher) == ["a.tool"]  # not checked again within the interval
    clock.now += 0.2
    assert names(watcher) == ["b.tool"]
    path.write_text(snapshot_text("workflow_invoke"), encoding="utf-8")
    clock.now += 1
    assert names(watcher) == ["b.tool"]
    path.unlink()
    clock.now += 1
    assert names(watcher) == ["b.tool"]
    path.write_text(snapshot_text("c.tool"), encoding="utf-8")
    clock.now += 1
    assert names(watcher) == ["c.tool"]


def test_an_invalid_file_at_start_up_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mcp-router.yml"
    path.write_text("tools: [{name: x}]", encoding="utf-8")
    with pytest.raises(RouterError, match="tools"):
        SnapshotWatcher(path)
    assert SnapshotWatcher(tmp_path / "absent.yml").current().tools == ()
