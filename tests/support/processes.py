"""Several service processes on one database, for tests that need real processes.

The one place a test starts service processes for a shared database: when the command line
changes (a `workflow-mcp serve` / `worker` console script), only this helper changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from runtime.security.devtools import DevIdentity
from tests.support.server import LiveServer, run_server


@contextmanager
def serving_processes(
    database_url: str, directory: Path, identity: DevIdentity, count: int
) -> Iterator[list[LiveServer]]:
    """Run `count` service processes (each with its executor) on database_url."""
    with ExitStack() as stack:
        servers = []
        for index in range(count):
            own = directory / f"process-{index}"
            own.mkdir(parents=True, exist_ok=True)
            servers.append(stack.enter_context(run_server(database_url, own, identity)))
        yield servers
