"""Benchmark (not a test): how soon a run waiting on a human task resumes once it is answered.

    .venv/bin/python -m bench.human_tasks [--runs 50] [--fast]

Starts PostgreSQL, the real service (bench/harness.py) and saves one start-run definition: an
approval `ask` for the role `approver`, then a `set` recording the answer. For each of --runs
runs: workflow_start, wait until the task is listed, then time workflow_task_complete's call
against the run's end, read with workflow_wait_result sent right after the completion's answer
(the waiter returns as soon as the run ends). Prints p50/p95/p99/max of answer -> run ended
(issue 22: "the run resumes within 100 ms of completion").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

import httpx

from bench.harness import Gateway, database, gateway_for, new_id, running_service
from bench.workload import CALLER_ROLES, OWNER

APPROVAL = (
    "document:\n"
    '  dsl: "1.0.3"\n'
    "  namespace: bench\n"
    "  name: approval\n"
    '  version: "1.0.0"\n'
    "do:\n"
    "  - requestApproval:\n"
    "      ask:\n"
    "        prompt: Approve?\n"
    "        mode: approval\n"
    "        assignment:\n"
    "          roleId: approver\n"
    "        options:\n"
    "          - label: Approve\n"
    "            value: APPROVED\n"
    "          - label: Reject\n"
    "            value: REJECTED\n"
    "      export:\n"
    "        as:\n"
    "          approval: ${ output }\n"
    "  - recordDecision:\n"
    "      set:\n"
    "        decision: ${ context.approval.value }\n"
)


def _result(reply: Any, what: str) -> dict[str, Any]:
    if reply.outcome != "OK":
        raise RuntimeError(f"{what} failed: {reply.outcome} {reply.body}")
    return dict(reply.body["result"]["structuredContent"])


async def _save(owner: Gateway, host_id: str, wf_def_id: str) -> None:
    save = {
        "hostId": host_id,
        "wfDefId": wf_def_id,
        "namespace": "bench",
        "name": "approval",
        "sourceRevision": 1,
        "actor": "bench",
        "version": "1.0.0",
        "definition": APPROVAL,
        "lifecycleStatus": "PUBLISHED",
        "catalogVisible": False,
        "owner": {"userId": OWNER, "positionId": "pos-1"},
        "active": True,
    }
    _result(await owner.call("workflow_definition_save", save), "save")


async def _open_task(approver: Gateway, instance: str) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listed = _result(
            await approver.call("workflow_task_list", {"workflowInstanceId": instance}), "list"
        )
        if listed["tasks"]:
            return str(listed["tasks"][0]["taskId"])
        await asyncio.sleep(0.01)
    raise RuntimeError("the task was never listed")


async def _one(starter: Gateway, approver: Gateway, wf_def_id: str) -> float:
    started = _result(
        await starter.call("workflow_start", {"wfDefId": wf_def_id, "input": {}}), "start"
    )
    instance = str(started["workflowInstanceId"])
    task_id = await _open_task(approver, instance)
    answer = {"taskId": task_id, "value": "APPROVED", "operationId": new_id()}
    began = time.perf_counter()
    _result(await approver.call("workflow_task_complete", answer), "complete")
    ended = _result(
        await starter.call("workflow_wait_result", {"workflowInstanceId": instance}), "wait"
    )
    elapsed = time.perf_counter() - began
    if ended.get("state") != "COMPLETED":
        raise RuntimeError(f"the run did not complete: {ended}")
    return elapsed * 1000


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _main(runs: int, fast: bool) -> None:
    with database(fast=fast) as (url, postmaster), running_service(url, postmaster, {}) as service:
        host_id = new_id()
        async with httpx.AsyncClient(timeout=60.0) as http:
            owner = gateway_for(service, http, host_id, OWNER, CALLER_ROLES)
            starter = gateway_for(service, http, host_id, "bench-starter", CALLER_ROLES)
            approver = gateway_for(service, http, host_id, "bench-approver", ("approver",))
            wf_def_id = new_id()
            await _save(owner, host_id, wf_def_id)
            await _one(starter, approver, wf_def_id)  # warm-up
            samples = sorted([await _one(starter, approver, wf_def_id) for _ in range(runs)])
    print(
        f"answer -> run ended, {len(samples)} runs: p50 {_quantile(samples, 0.5):.1f} ms, "
        f"p95 {_quantile(samples, 0.95):.1f} ms, p99 {_quantile(samples, 0.99):.1f} ms, "
        f"max {samples[-1]:.1f} ms, mean {statistics.fmean(samples):.1f} ms",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when it completed (figures are reported, not judged)."""
    parser = argparse.ArgumentParser(prog="bench.human_tasks", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--fast", action="store_true", help="PostgreSQL without fsync")
    args = parser.parse_args(argv)
    asyncio.run(_main(args.runs, args.fast))
    return 0


if __name__ == "__main__":
    sys.exit(main())
