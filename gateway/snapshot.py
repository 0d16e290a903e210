"""The served mcp-router.yml, reloaded on change; a bad new file keeps the last good one."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gateway.router import RouterError, RouterSnapshot, load_snapshot

log = logging.getLogger("workflow.gateway.snapshot")

# (device, inode, size, mtime): write_snapshot replaces the file, so a new inode shows a change
# even when the size and the mtime tick are the same.
Signature = tuple[int, int, int, int] | None


def _signature(path: Path) -> Signature:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


class SnapshotWatcher:
    """Serves the last good snapshot, checking the file for a change at most every interval."""

    def __init__(
        self,
        path: Path,
        *,
        interval_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._signature = _signature(path)
        # At start-up there is no last good snapshot to fall back on: an invalid file raises.
        self._snapshot = load_snapshot(path)
        self._checked = clock()
        log.info("serving %d workflow-backed Tool(s) from %s", len(self._snapshot.tools), path)

    def current(self) -> RouterSnapshot:
        """The snapshot to serve now (re-read first when the file changed)."""
        now = self._clock()
        if now - self._checked < self._interval_s:
            return self._snapshot
        with self._lock:
            if now - self._checked >= self._interval_s:
                self._checked = now
                self._reload_if_changed()
            return self._snapshot

    def _reload_if_changed(self) -> None:
        signature = _signature(self.path)
        if signature == self._signature:
            return
        self._signature = signature
        if signature is None:
            log.warning("%s disappeared; still serving the last good snapshot", self.path)
            return
        try:
            snapshot = load_snapshot(self.path)
        except (RouterError, OSError, UnicodeDecodeError) as error:
            # The message names the entry and field (never a token: the file holds none).
            log.error("%s is invalid, still serving the last good snapshot: %s", self.path, error)
            return
        self._snapshot = snapshot
        log.info("reloaded %s: %d workflow-backed Tool(s)", self.path, len(snapshot.tools))
