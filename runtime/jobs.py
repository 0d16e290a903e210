"""Background jobs of a service process: small named loops with their own intervals."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from runtime.publication import sweep_operation_receipts
from runtime.services import Services

log = logging.getLogger("workflow.jobs")


@dataclass
class PeriodicJob:
    """Runs `work` every `interval_s` seconds until stopped; a failing run is logged, not fatal."""

    name: str
    interval_s: float
    work: Callable[[], Awaitable[object]]
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self) -> None:
        """Start the loop (first run at once)."""
        self._task = asyncio.create_task(self._loop(), name=f"job:{self.name}")

    async def stop(self) -> None:
        """Cancel the loop and wait for it."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.work()
            except Exception as exc:
                # Only the type: messages can carry SQL. The next interval retries.
                log.warning("job %s failed: %s", self.name, type(exc).__name__)
            await asyncio.sleep(self.interval_s)


def service_jobs(services: Services) -> list[PeriodicJob]:
    """The jobs every service process runs."""
    interval = services.settings.publication.receipt_sweep_interval_s
    return [
        # Operation receipts are kept 30 days (seed 000 "Lost receipts"), then swept.
        PeriodicJob(
            "sweep-operation-receipts",
            interval,
            lambda: sweep_operation_receipts(services.database),
        ),
    ]
