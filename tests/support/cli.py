"""`workflow-mcp` commands run in this process as a shell runs them: exit code, stdout, stderr.

A `workflow-mcp` process costs a Python start and the service's imports (one to two seconds on
two busy cores) where a `runs` or `secrets` command does milliseconds of work, and a test of
those commands runs a dozen. Here the console script's own entry point runs in a thread (it
calls asyncio.run, as in a process) with its environment, stdin, stdout and stderr swapped for
the test's, and its log lines written to its stderr as `configure_logging` writes them in a
process. What only a process shows (the console script, signals, a server's lifetime) is
tested with real processes (tests/integration/composition/test_service_commands.py, tests/e2e).
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from typing import IO, Any

from runtime import telemetry
from tests.support.live_stack import environment
from workflow_mcp.cli import main

# One command at a time: the environment, the standard streams and logging are the process's.
_LOCK = threading.Lock()


async def run_command(
    *argv: str, stdin: str = "", env: Mapping[str, str] | None = None
) -> tuple[int, str, str]:
    """Run `workflow-mcp ARGV...` with stdin and extra environment; (exit code, stdout, stderr)."""
    return await asyncio.to_thread(_run, list(argv), stdin, dict(env or {}))


def _run(argv: list[str], stdin: str, env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        _LOCK,
        environment(env),
        _logging_to(err),
        _stdin(stdin),
        redirect_stdout(out),
        redirect_stderr(err),
    ):
        try:
            code = main(argv)
        except SystemExit as exit_:
            # argparse exits 2 on a usage error (0 for --help), as the process would.
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue(), err.getvalue()


@contextmanager
def _stdin(text: str) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


@contextmanager
def _logging_to(stream: IO[str]) -> Iterator[None]:
    """The command's logging set-up, aimed at stream, and the test process's restored after."""
    root = logging.getLogger()
    loggers = [root, *(logging.getLogger(name) for name in ("workflow", "runtime"))]
    levels = [logger.level for logger in loggers]
    handlers = list(root.handlers)
    configure, configure_logging = telemetry.configure, telemetry.configure_logging

    def to_stream(settings: telemetry.TelemetrySettings, _: Any = None) -> None:
        # Tracing stays the test process's: a command's spans are not what these tests check.
        configure_logging(settings, stream)

    telemetry.configure = to_stream  # type: ignore[assignment]
    telemetry.configure_logging = to_stream  # type: ignore[assignment]
    try:
        yield
    finally:
        telemetry.configure, telemetry.configure_logging = configure, configure_logging
        root.handlers[:] = handlers
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
