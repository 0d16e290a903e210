"""Pieces of the seed 001 Phase 1 exit-gate tests: service processes of their own, kills.

A gate test that kills a process or tunes admission gets processes on a database of its own,
so nothing it does reaches the session's shared qualification stack.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from runtime.security.devtools import DevIdentity
from tests.support.live_backends import RecordingBackend, serving_on_thread
from tests.support.live_stack import environment, stack_environment
from tests.support.processes import serving_processes
from tests.support.scale_out import scalar
from tests.support.server import LiveServer

# Totals that any admitted call adds to (a refusal before starting adds to none of them).
ADMISSION_TABLES = (
    "workflow_process",
    "workflow_invocation_t",
    "workflow_task",
    "workflow_idempotency_t",
    "workflow_run_credential",
    "workflow_action_authority_t",
)


@dataclass(frozen=True)
class Processes:
    """Service processes sharing one database, and the backend their runs call."""

    servers: list[LiveServer]
    backend: RecordingBackend
    backend_origin: str


@contextmanager
def service_processes(
    database_url: str,
    directory: Path,
    identity: DevIdentity,
    count: int,
    settings: Mapping[str, str] | None = None,
) -> Iterator[Processes]:
    """count service processes on database_url reaching a recording backend; stopped after."""
    backend = RecordingBackend()
    with ExitStack() as stack:
        origin = stack.enter_context(serving_on_thread(backend))
        values = {**stack_environment(origin, None), **(settings or {})}
        with environment(values):
            servers = stack.enter_context(
                serving_processes(database_url, directory, identity, count)
            )
        yield Processes(servers, backend, origin)


async def admission_totals(database_url: str) -> dict[str, int]:
    """How many rows each admission table holds."""
    return {
        table: int(await scalar(database_url, f"SELECT count(*) FROM {table}"))
        for table in ADMISSION_TABLES
    }


async def running_worker_pid(database_url: str, instance: str) -> int | None:
    """The process id of the executor running the run's task (None while nobody runs it)."""
    worker = await scalar(
        database_url,
        "SELECT worker_id FROM workflow_task WHERE process_id = %s AND state = 'running'",
        instance,
    )
    # Executor ids are host:pid:suffix (runtime.scheduler.executor).
    return None if worker is None else int(str(worker).split(":")[-2])


def kill_child(pid: int) -> None:
    """SIGKILL a process this test process started (refuses any other process)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        parent = int(stat.read().rsplit(")", 1)[1].split()[1])
    assert parent == os.getpid(), f"process {pid} is not a child of this test"
    os.kill(pid, signal.SIGKILL)


def answering(server: LiveServer) -> bool:
    """Whether the server still answers /healthz."""
    try:
        return httpx.get(f"{server.base_url}/healthz", timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


async def queued_longer_than(database_url: str, instance: str, at_least_ms: int) -> bool:
    """Whether the run's task has waited ready (unclaimed) for at least at_least_ms."""
    sql = (
        "SELECT count(*) FROM workflow_task WHERE process_id = %s AND state = 'ready'"
        " AND enqueued_ts < now() - make_interval(secs => %s)"
    )
    return bool(await scalar(database_url, sql, instance, at_least_ms / 1000))
