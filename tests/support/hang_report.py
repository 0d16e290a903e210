"""A report of what every asyncio task waits on, written shortly before pytest-timeout fires.

pytest-timeout's own dump shows threads only, and the main thread of an asyncio test just sits in
``select()``: the report names the await chain of each pending task instead, so a teardown that
hangs in CI says where.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from typing import Any


def await_chain(task: asyncio.Task[Any]) -> str:
    """Where a suspended task waits: its await chain, innermost frame last."""
    return " > ".join(_frames(task.get_coro())) or repr(task.get_coro())


def _pending_tasks() -> list[asyncio.Task[Any]]:
    registry: Any = getattr(asyncio.tasks, "_all_tasks", ())
    for _ in range(5):
        try:
            return [task for task in list(registry) if not task.done()]
        except RuntimeError:  # the set changed while we copied it
            continue
    return []


def _frames(awaited: Any) -> list[str]:
    points: list[str] = []
    while awaited is not None and len(points) < 16:
        frame = (
            getattr(awaited, "cr_frame", None)
            or getattr(awaited, "gi_frame", None)
            or getattr(awaited, "ag_frame", None)
        )
        if frame is not None:
            name = "/".join(frame.f_code.co_filename.rsplit("/", 2)[-2:])
            points.append(f"{name}:{frame.f_lineno} {frame.f_code.co_name}")
        awaited = (
            getattr(awaited, "cr_await", None)
            or getattr(awaited, "gi_yieldfrom", None)
            or getattr(awaited, "ag_await", None)
        )
    return points


def _running_async_generators() -> list[str]:
    # A task awaiting an async generator (a fixture, a context manager) shows no chain past it.
    chains = []
    for thing in gc.get_objects():
        if type(thing).__name__ == "async_generator" and getattr(thing, "ag_running", False):
            chains.append(" > ".join(_frames(thing)))
    return chains


def report(nodeid: str) -> None:
    """Write each pending task's await chain, and each running async generator's, to stderr."""
    lines = [f"\n==== hang report for {nodeid}: pending asyncio tasks ===="]
    for task in _pending_tasks():
        lines.append(f"- {task.get_name()}: {await_chain(task)}")
    lines.append("==== running async generators ====")
    lines.extend(f"- {chain}" for chain in _running_async_generators())
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


def arm(nodeid: str, after_s: float) -> threading.Timer:
    """Start a daemon timer that reports after after_s unless cancelled first."""
    timer = threading.Timer(after_s, report, args=(nodeid,))
    timer.daemon = True
    timer.start()
    return timer
