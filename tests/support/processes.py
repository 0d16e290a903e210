"""Several service processes on one database, for tests that need real processes.

The one place a test starts service processes for a shared database: when the command line
changes (a `workflow-mcp serve` / `worker` console script), only this helper changes.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from runtime.security.devtools import DevIdentity
from tests.support.server import LiveServer, run_server

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def serving_processes(
    database_url: str,
    directory: Path,
    identity: DevIdentity,
    count: int,
    args: Sequence[str] = (),
) -> Iterator[list[LiveServer]]:
    """Run `count` service processes (each with its executor unless args say --no-workers)."""
    with ExitStack() as stack:
        servers = []
        for index in range(count):
            own = directory / f"process-{index}"
            own.mkdir(parents=True, exist_ok=True)
            servers.append(stack.enter_context(run_server(database_url, own, identity, args)))
        yield servers


@asynccontextmanager
async def worker_command(
    args: list[str],
    env: Mapping[str, str],
    *,
    ready_timeout_s: float = 30,
    log_path: Path | None = None,
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A `runtime.cli worker` process with args, yielded once it printed ready; then stopped.

    log_path: where its log lines (stderr) go; by default they are dropped.
    """
    with ExitStack() as files:
        stderr = (
            files.enter_context(log_path.open("wb"))
            if log_path is not None
            else asyncio.subprocess.DEVNULL
        )
        async with _worker_process(args, env, ready_timeout_s, stderr) as proc:
            yield proc


@asynccontextmanager
async def _worker_process(
    args: list[str], env: Mapping[str, str], ready_timeout_s: float, stderr: Any
) -> AsyncIterator[asyncio.subprocess.Process]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runtime.cli", "worker", *args,
        cwd=REPO, env=dict(env), stdout=asyncio.subprocess.PIPE, stderr=stderr,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(ready_timeout_s):
            line = await proc.stdout.readline()
        assert line.decode().startswith("ready"), line
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                await proc.wait()
