"""A worker process: claims and runs workflow tasks, no API (`workflow-mcp worker`).

Prints ``ready <worker_id>`` once LISTEN is in effect and claiming has started; stops
gracefully on SIGTERM or SIGINT. Configured like the service (the `execution`, `store` and
`security` sections): its security section verifies every run's user token before each call,
its keyring opens sealed run credentials. Fault points come from $WORKFLOW_FAULTS.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
from collections.abc import Mapping
from typing import Any, cast

import msgspec

from runtime.composition.jobs import scheduler_settings
from runtime.engine.cel import prepare_parser
from runtime.execution import WorkflowRuntime
from runtime.scheduler.executor import Executor
from runtime.scheduler.lease import TaskHandler
from runtime.security import load_configured_keyring
from runtime.settings import Settings
from runtime.store.bootstrap import open_store

# Connections beyond one per slot: LISTEN, the reaper, lease renewals.
SPARE_CONNECTIONS = 4


def load_handlers(spec: str) -> Mapping[str, TaskHandler]:
    """Import handlers from "module:attribute" (a mapping of task kind to handler)."""
    module_name, _, attribute = spec.partition(":")
    value: Any = getattr(importlib.import_module(module_name), attribute or "HANDLERS")
    return cast(Mapping[str, TaskHandler], value)


def _slots(settings: Settings) -> int:
    section = settings.execution
    return section.interactive_slots + section.standard_slots + section.batch_slots


async def _wait_for_signal_or_stop(executor: Executor) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    signalled = asyncio.create_task(stop.wait())
    stopped = asyncio.create_task(executor.wait_stopped())
    await asyncio.wait([signalled, stopped], return_when="FIRST_COMPLETED")
    for waiter in (signalled, stopped):
        waiter.cancel()


async def run_worker(
    settings: Settings, *, worker_id: str | None = None, handlers: str | None = None
) -> None:
    """Run an executor on the configured store until SIGTERM/SIGINT."""
    pool_max = max(settings.store.pool_max_size, _slots(settings) + SPARE_CONNECTIONS)
    store_settings = msgspec.structs.replace(
        settings.store, pool_min_size=1, pool_max_size=pool_max
    )
    # Built before the first claim, off the event loop (celpy_seam says why it is lazy).
    await asyncio.to_thread(prepare_parser)
    store = await open_store(store_settings, run_migrations=False)
    runtime = WorkflowRuntime.verifying(
        settings.execution.outbound,
        load_configured_keyring(settings.security),
        settings.security,
        destinations=settings.publication.destinations.address_policy(),
        maximum_parallelism=settings.execution.maximum_parallelism,
        database=store.database,
    )
    task_handlers = runtime.handlers() if handlers is None else load_handlers(handlers)
    executor = Executor(
        store.database, task_handlers, scheduler_settings(settings), worker_id=worker_id
    )
    try:
        await executor.start()
        print(f"ready {executor.worker_id}", flush=True)
        await _wait_for_signal_or_stop(executor)
        await executor.stop()
    finally:
        await runtime.aclose()
        await store.close(stop_embedded=True)
