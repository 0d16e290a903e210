"""Where should interpretation run? Loop lag and per-task overhead: loop, thread, process.

    .venv/bin/python bench/offload.py [--items 12] [--small 200]

A benchmark, not a test (numbers depend on the machine). For each placement it runs a heavy
pure definition (three nested loops over --items items) while a 10 ms ticker on the serving
loop records how late it wakes (the loop lag every request and lease renewal would see), then
runs --small one-task `set` workflows one after another and reports the mean time per run.
The numbers back the choice documented in runtime/engine/run/engine_threads.py.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from runtime.canonical import load_definition_yaml
from runtime.engine import WorkflowDefinition, parse_definition
from runtime.engine.run import (
    EngineThreads,
    HttpRequest,
    HttpResponse,
    McpRequest,
    RunLimits,
    run_workflow,
)
from runtime.engine.step_meter import StepMeter

NESTED = """
document: {dsl: "1.0.3", namespace: bench, name: nested, version: "1.0.0"}
do:
  - outer:
      for: {each: a, in: "${ input.items }"}
      do:
        - middle:
            for: {each: b, in: "${ input.items }"}
            do:
              - inner:
                  for: {each: c, in: "${ input.items }"}
                  do:
                    - add:
                        set: {items: "${ input.items }", total: "${ a * b + c }"}
"""
SMALL = """
document: {dsl: "1.0.3", namespace: bench, name: small, version: "1.0.0"}
do:
  - only:
      set: {seen: "${ input.n + 1 }"}
"""


class NoEffects:
    """The benchmark definitions call nothing."""

    async def call_http(self, request: HttpRequest) -> HttpResponse:
        """Never called."""
        raise AssertionError("no calls")

    async def call_mcp(self, request: McpRequest) -> dict[str, Any]:
        """Never called."""
        raise AssertionError("no calls")


@functools.cache
def parsed(text: str) -> WorkflowDefinition:
    """Parse once per process, as the task runner caches pinned definitions."""
    return parse_definition(load_definition_yaml(text))


async def interpret(text: str, data: Any) -> str:
    """Run a definition to its outcome status (no deadline: the heavy one runs long)."""
    limits = RunLimits(total_deadline_ms=None)
    outcome = await run_workflow(parsed(text), data, NoEffects(), limits)
    return outcome.status


def interpret_in_process(text: str, data: Any) -> str:
    """The process placement: a fresh loop in the worker process."""
    return asyncio.run(interpret(text, data))


Placement = Callable[[str, Any], Awaitable[str]]


def placements(threads: EngineThreads, processes: ProcessPoolExecutor) -> dict[str, Placement]:
    """The three candidates, each as `await place(text, data)` on the serving loop."""

    async def on_loop(text: str, data: Any) -> str:
        return await interpret(text, data)

    async def in_thread(text: str, data: Any) -> str:
        return await threads.run(lambda: interpret(text, data), StepMeter())

    async def in_process(text: str, data: Any) -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(processes, interpret_in_process, text, data)

    return {"loop": on_loop, "thread": in_thread, "process": in_process}


async def loop_lag(place: Placement, items: int) -> dict[str, float]:
    """Max and p99 lateness of a 10 ms ticker while the heavy definition runs."""
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.010)
            lags.append((time.perf_counter() - start - 0.010) * 1000)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker is waiting before the heavy run starts
    started = time.perf_counter()
    await place(NESTED, {"items": list(range(items))})
    elapsed = time.perf_counter() - started
    done.set()
    await tick
    lags.sort()
    return {
        "heavy_s": round(elapsed, 2),
        "lag_max_ms": round(lags[-1], 1),
        "lag_p99_ms": round(lags[int(len(lags) * 0.99)], 1),
        "ticks": len(lags),
    }


async def overhead(place: Placement, runs: int) -> float:
    """Mean milliseconds per small one-task run, sequentially."""
    await place(SMALL, {"n": 0})  # warm: parse caches, threads, worker processes
    started = time.perf_counter()
    for n in range(runs):
        await place(SMALL, {"n": n})
    return round((time.perf_counter() - started) / runs * 1000, 3)


async def main() -> None:
    """Measure every placement and print one JSON object."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--switch-interval-ms", type=float, default=None)
    parser.add_argument("--only", choices=["loop", "thread", "process"], default=None)
    args = parser.parse_args()
    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000)
    threads = EngineThreads(2)
    report: dict[str, Any] = {"items": args.items}
    with ProcessPoolExecutor(2) as processes:
        for name, place in placements(threads, processes).items():
            if args.only not in (None, name):
                continue
            await place(SMALL, {"n": 0})
            report[name] = {
                **await loop_lag(place, args.items),
                "small_run_ms": await overhead(place, args.small),
            }
            print(name, report[name], flush=True)
    threads.close()
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
