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
    timings = [await _healthz(http)]
    while not call.done():
        timings.append(await _healthz(http))
        await asyncio.wait({call}, timeout=0.05)
    return Probed(await call, max(timings), len(timings))


# A loop held by the call's own work waits out most of the call in one stretch; a loop that
# only hands the work to threads waits a small share of it, however slow the machine.
HELD_SHARE = 0.25


def assert_loop_kept_serving(probed: Probed) -> None:
    """No probe waited for the loop more than a small share of the hostile call's duration.

    The property of work kept off the serving loop, measured against the call itself rather
    than the wall clock: a busy machine slows the probes and the call alike (a fixed bound
    failed once at 120 ms on a loaded CI run), while work done on the loop makes one probe
    wait about as long as that work. Under HEALTHZ_BOUND_S a probe passes whatever the share.
    """
    assert probed.probes >= 3, f"only {probed.probes} probes while the call ran"
    bound = max(HEALTHZ_BOUND_S, HELD_SHARE * probed.call_s)
    assert probed.slowest_healthz_s <= bound, (
        f"/healthz waited {probed.slowest_healthz_s * 1000:.0f} ms during a call of "
        f"{probed.call_s * 1000:.0f} ms: the loop was held by the call's work"
    )


def assert_responsive(probed: Probed) -> None:
    """/healthz answered within the bound during the hostile call."""
    assert probed.slowest_healthz_s < HEALTHZ_BOUND_S, (
        f"/healthz took {probed.slowest_healthz_s * 1000:.0f} ms during the hostile call"
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
    while True:
        arrived = time.perf_counter()
        await asyncio.wait({call}, timeout=TICK_S)
        held = max(0.0, time.perf_counter() - arrived - TICK_S)
        timings.append(held + await _healthz(http))
        if call.done():
            break
    result = await call
    return Probed(result, max(timings), len(timings), time.perf_counter() - started)


TICK_S = 0.02
