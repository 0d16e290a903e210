"""Cancellation that a retry loop must not swallow.

A task cancelled in the middle of a statement can see its CancelledError replaced by an
ordinary exception on the way out: psycopg re-raises the cancellation, but the connection or
transaction block then exits on the broken link and raises its own error over it, which the
store translates into StoreUnavailable. A background loop that logs every Exception and tries
again would then run on after it was cancelled, and whoever awaits it (a shutdown, a test's
teardown) would wait for ever. Such loops call `reraise_if_cancelled` in their handler.
"""

from __future__ import annotations

import asyncio


def cancelled() -> bool:
    """Whether the current task has been asked to stop and has not un-cancelled since."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def reraise_if_cancelled(exc: BaseException) -> None:
    """Raise CancelledError (caused by exc) when exc hid the current task's cancellation."""
    if cancelled():
        raise asyncio.CancelledError from exc
