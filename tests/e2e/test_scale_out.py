"""Scale-out on one PostgreSQL: two API processes (`serve --no-workers`) and two worker
processes serve 1,000 invokes with no lost or duplicated run; a worker killed mid-run is
recovered by the other; a third worker added under load takes work within one claim round, its
first (issue 14; docs/OPERATIONS.md defines a claim round)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import OWNER
from tests.support.invocation import client, publish_tool
from tests.support.processes import serving_processes
from tests.support.scale_out import (
    ROOMY_LIMITS,
    Load,
    claim_rounds,
    invoke_all,
    killed,
    scalar,
    worker,
)
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.requirement("001:Capacity And Availability"),
]

INVOKES = 1000
CONCURRENCY = 16
SLOTS = 4


async def test_two_api_and_two_worker_processes_serve_a_thousand_invokes_and_survive_a_kill(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    with serving_processes(database_url, tmp_path, live_identity, 2, ["--no-workers"]) as apis:
        config = tmp_path / "process-0" / "workflow.yaml"
        async with (
            httpx.AsyncClient(base_url=apis[0].base_url, timeout=120.0) as first,
            httpx.AsyncClient(base_url=apis[1].base_url, timeout=120.0) as second,
        ):
            tool = await publish_tool(
                client(first, live_identity, OWNER), admissionLimits=ROOMY_LIMITS
            )
            callers = [client(first, live_identity), client(second, live_identity)]
            load = Load()
            async with (
                # Killed by its fault point at the first task it runs: its claims hang leased.
                worker(
                    database_url, config, "doomed", SLOTS, "before_workflow_task_0=kill"
                ) as doomed,
                # Slowed at each claim so it cannot keep up alone: ready work then waits for
                # the third worker whenever it starts (its first claim round must find some).
                worker(database_url, config, "steady", SLOTS, "after_claim=sleep:250"),
            ):
                invokes = asyncio.create_task(invoke_all(callers, tool, INVOKES, CONCURRENCY, load))
                async with asyncio.timeout(120):
                    assert await killed(doomed)
                await wait_until(
                    lambda: load.finished >= INVOKES // 4 or invokes.done(),
                    what="a quarter of the invokes",
                    within_s=300,
                    every_s=0.2,
                )
                assert not invokes.done()
                # Work is waiting when the third worker starts: its first claim finds it.
                await wait_until(
                    lambda: _backlog(database_url), what="ready tasks", within_s=60, every_s=0.05
                )
                joiner_log = tmp_path / "joiner.log"
                async with worker(database_url, config, "joiner", SLOTS, debug_log=joiner_log):
                    await wait_until(
                        lambda: _claimed_by(database_url, "joiner"),
                        what="the added worker's first claims",
                        within_s=30,
                        every_s=0.1,
                    )
                    joined_under_load = not invokes.done()
                    async with asyncio.timeout(400):
                        await invokes
    assert load.refusals == []
    assert joined_under_load
    # Nothing lost: every call answered completed; nothing duplicated: one run and one task
    # per distinct input, all completed.
    assert len(load.instance_ids) == INVOKES
    assert len(set(load.instance_ids.values())) == INVOKES
    runs = "SELECT count(*) FROM workflow_process WHERE binding_id = %s"
    assert await scalar(database_url, runs, tool.binding_id) == INVOKES
    assert await scalar(database_url, runs + " AND state = 'COMPLETED'", tool.binding_id) == INVOKES
    tasks = (
        "SELECT count(*) FROM workflow_task t JOIN workflow_process p"
        " ON p.host_id = t.host_id AND p.process_id = t.process_id WHERE p.binding_id = %s"
    )
    assert await scalar(database_url, tasks, tool.binding_id) == INVOKES
    # The killed worker's claims were reclaimed and run again by another worker.
    assert await scalar(database_url, tasks + " AND t.attempts > 1", tool.binding_id) >= 1
    # The added worker took work within one claim round: its very first claim query (round 1,
    # at start) claimed tasks, and it ran tasks to completion.
    rounds = claim_rounds(joiner_log)
    assert rounds, "the added worker logged no claim"
    assert rounds[0] == 1, rounds[:5]
    done_by_joiner = tasks + " AND t.worker_id = 'joiner' AND t.state = 'done'"
    assert await scalar(database_url, done_by_joiner, tool.binding_id) >= 1


async def _backlog(database_url: str) -> bool:
    sql = "SELECT count(*) FROM workflow_task WHERE state = 'ready'"
    return bool(await scalar(database_url, sql))


async def _claimed_by(database_url: str, worker_id: str) -> bool:
    sql = "SELECT count(*) FROM workflow_task WHERE worker_id = %s"
    return bool(await scalar(database_url, sql, worker_id))
