"""Worker process: ``python -m runtime.scheduler.worker --database-url URL``.

Prints ``ready <worker_id>`` once LISTEN is in effect and claiming has started; stops
gracefully on SIGTERM or SIGINT. Fault points come from $WORKFLOW_FAULTS.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any, cast

from runtime.scheduler.executor import Executor
from runtime.scheduler.lease import TaskHandler
from runtime.scheduler.models import SchedulerSettings
from runtime.store import Database


def load_handlers(spec: str) -> Mapping[str, TaskHandler]:
    """Import handlers from "module:attribute" (a mapping of task kind to handler)."""
    module_name, _, attribute = spec.partition(":")
    value: Any = getattr(importlib.import_module(module_name), attribute or "HANDLERS")
    return cast(Mapping[str, TaskHandler], value)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    defaults = SchedulerSettings()
    parser = argparse.ArgumentParser(prog="python -m runtime.scheduler.worker")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--handlers", default="runtime.scheduler.demo:HANDLERS")
    parser.add_argument("--worker-id", default=None)
    parser.add_argument("--runtime-role", default="workflow_runtime")
    parser.add_argument("--interactive-slots", type=int, default=defaults.interactive_slots)
    parser.add_argument("--standard-slots", type=int, default=defaults.standard_slots)
    parser.add_argument("--batch-slots", type=int, default=defaults.batch_slots)
    parser.add_argument("--lease-ms", type=int, default=defaults.lease_ms)
    parser.add_argument("--renew-interval-ms", type=int, default=defaults.renew_interval_ms)
    parser.add_argument("--reap-interval-ms", type=int, default=defaults.reap_interval_ms)
    parser.add_argument("--poll-interval-ms", type=int, default=defaults.poll_interval_ms)
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error("--database-url or $DATABASE_URL is required")
    return args


async def run_worker(args: argparse.Namespace) -> None:
    """Run an executor until SIGTERM/SIGINT."""
    settings = SchedulerSettings(
        interactive_slots=args.interactive_slots,
        standard_slots=args.standard_slots,
        batch_slots=args.batch_slots,
        lease_ms=args.lease_ms,
        renew_interval_ms=args.renew_interval_ms,
        reap_interval_ms=args.reap_interval_ms,
        poll_interval_ms=args.poll_interval_ms,
    )
    slots = args.interactive_slots + args.standard_slots + args.batch_slots
    db = Database(args.database_url, runtime_role=args.runtime_role, min_size=1, max_size=slots + 4)
    await db.open()
    executor = Executor(db, load_handlers(args.handlers), settings, worker_id=args.worker_id)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await executor.start()
        print(f"ready {executor.worker_id}", flush=True)
        stopped = asyncio.create_task(executor.wait_stopped())
        await asyncio.wait(
            [asyncio.create_task(stop.wait()), stopped], return_when="FIRST_COMPLETED"
        )
        await executor.stop()
    finally:
        await db.close()


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    args = _parse(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    asyncio.run(run_worker(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
