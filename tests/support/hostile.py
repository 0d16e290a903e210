"""Hostile-input helpers: run one hostile call and probe /healthz while it is in flight."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

T = TypeVar("T")

# The bound: the service keeps answering its liveness probe this fast during an attack.
HEALTHZ_BOUND_S = 0.1


@dataclass(frozen=True)
class Probed:
    """The hostile call's result and the slowest /healthz answer seen while it ran."""

    result: Any
    slowest_healthz_s: float
    probes: int
    # How long the hostile call took, from its start to its answer (while_probing_steadily).
    call_s: float = 0.0
    # The most CPU the serving loop's thread spent within one probe's window (while_probing_
    # steadily): work done on the loop shows here; a busy machine, which slows the probes and
    # the call alike, and work handed to other threads do not.
    loop_cpu_s: float = 0.0


async def _healthz(http: httpx.AsyncClient) -> float:
    started = time.perf_counter()
    response = await http.get("/healthz")
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.status_code
    return elapsed


async def while_probing(http: httpx.AsyncClient, hostile: Awaitable[T]) -> Probed:
    """Run the hostile call; probe /healthz as soon as it has started and until it ends.

    The first probe is sent right after the call has started (it is scheduled first), so a
    call that holds the serving loop delays that probe; later probes run while it is still in
    flight. At least one probe is always made.
    """
    call = asyncio.ensure_future(hostile)
    await asyncio.sleep(0)  # let the call start before the first probe
    timings: list[float] = []
    loop_cpu: list[float] = []
    while True:
        cpu = time.thread_time()
        timings.append(await _healthz(http))
        loop_cpu.append(time.thread_time() - cpu)
        if call.done():
            break
        await asyncio.wait({call}, timeout=0.05)
    return Probed(await call, max(timings), len(timings), loop_cpu_s=max(loop_cpu))


# The most CPU the serving loop's thread may spend within one probe's window (a tick and a
# probe). Its own share there (the probe, the call's parsing and answer) is about 5 ms on this
# machine; a call whose checks ran on the loop spent 75-240 ms. CPU time, unlike the wall
# clock, does not grow when the machine is busy: a wall-clock bound failed twice on loaded
# clean-clone runs (a probe waited 120 ms against 100 ms, then 179 ms against 25% of a 707 ms
# call), with the work off the loop.
LOOP_CPU_BOUND_S = 0.03


def assert_loop_kept_serving(probed: Probed) -> None:
    """The call's work ran off the serving loop: probes were answered while it ran, and within
    no probe's window did the loop's thread spend more than LOOP_CPU_BOUND_S of CPU."""
    assert probed.probes >= 3, f"only {probed.probes} probes while the call ran"
    assert probed.loop_cpu_s <= LOOP_CPU_BOUND_S, (
        f"the serving loop's thread spent {probed.loop_cpu_s * 1000:.0f} ms of CPU within one "
        f"probe's window during a call of {probed.call_s * 1000:.0f} ms: its work ran on the loop"
    )


def assert_responsive(probed: Probed) -> None:
    """/healthz answered within the bound during the hostile call, or a slower probe waited on
    a busy machine, not on the loop: the loop's thread spent at most LOOP_CPU_BOUND_S of CPU
    while that probe was out."""
    if probed.slowest_healthz_s < HEALTHZ_BOUND_S:
        return
    assert probed.loop_cpu_s <= LOOP_CPU_BOUND_S, (
        f"/healthz took {probed.slowest_healthz_s * 1000:.0f} ms during the hostile call, the "
        f"serving loop's thread spending {probed.loop_cpu_s * 1000:.0f} ms of CPU meanwhile"
    )


async def while_probing_steadily(http: httpx.AsyncClient, hostile: Awaitable[T]) -> Probed:
    """Like while_probing, but a probe is always due: each one counts the time it waited for
    the loop as well as its answer.

    Over in-process ASGI a probe may run entirely between two steps of the hostile call, so
    while_probing can miss a call that holds the loop while no probe is in flight. Here a
    probe "arrives" every TICK_S; when the loop was held past that tick, the excess is part
    of how long that probe waited, as a request arriving over the network would.
    """
    call = asyncio.ensure_future(hostile)
    started = time.perf_counter()
    timings: list[float] = []
    loop_cpu: list[float] = []
    while True:
        arrived, cpu = time.perf_counter(), time.thread_time()
        await asyncio.wait({call}, timeout=TICK_S)
        held = max(0.0, time.perf_counter() - arrived - TICK_S)
        timings.append(held + await _healthz(http))
        loop_cpu.append(time.thread_time() - cpu)
        if call.done():
            break
    result = await call
    elapsed = time.perf_counter() - started
    return Probed(result, max(timings), len(timings), elapsed, max(loop_cpu))


TICK_S = 0.02
