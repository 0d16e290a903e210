"""Interpretation off the serving loop: engine threads, each with its own event loop.

Why: interpreting a definition is pure CPU between effects. On the serving loop a definition
with three nested loops over 60 items held it for seconds: `/healthz` stalled for every
tenant, lease renewal stopped, the 1 s lease lapsed and the task was claimed again and again.
Here the interpreter runs on a pool thread's own event loop; the serving loop keeps
answering requests and renewing leases while it computes.

Why threads, not processes: measured with `python bench/offload.py --items 10 --small 300`
on the shared 2-core machine (load average ~7), a 10 ms ticker on the serving loop while
nested loops over 10 items run, then 300 one-task `set` runs one after another:

    placement   heavy run   loop lag max / p99    per small run
    loop        2.2 s       2,146 ms (all of it)  0.72 ms
    thread      2.6 s       15 ms / 12 ms         1.24 ms
    process     2.9 s       27 ms / 16 ms         3.68 ms

Under this load a process does not lag the loop less than a thread that hands over the GIL
(see below), but it costs ~3 ms more per task (pickling the definition, input and result
through a pipe) and every effect (HTTP, MCP, step ledger, budget) would have to cross the
process boundary as well, with the lease, fencing and psycopg connections in the parent.
Total CPU is bounded either way: every task attempt runs under a deterministic step budget
(``runtime.engine.step_meter``). Heavy work that must not share the API's cores belongs in
`worker` processes, which run this same code.

The GIL: a CPU-bound thread gives the GIL to a waiting loop only every switch interval
(5 ms), on every wake-up of the loop; measured, that let the loop lag 58-160 ms. So the step
meter of an off-loop task releases the GIL every YIELD_EVERY_STEPS steps (about 1 ms of
interpreter work), which brought the lag to the numbers above.

Small attempts stay on the serving loop: handing one to a thread and back cost more than
running it (measured on one popular Tool of one-task `set` runs: the loop then spent a fifth
of its samples waiting for the GIL, taken by engine threads handing it back and forth). So an
attempt is first tried on the serving loop with an allowance of ``on_loop_steps`` steps; one
that outgrows it, or reaches its first effect, raises ``LeaveTheLoop`` and starts over on an
engine thread with its meter at zero. Starting over is safe because nothing was sent yet and
the interpreter is deterministic: the attempt computes the same result and stops at the same
step as if it had run on the thread from the start.

The boundary: everything with a side effect stays on the serving loop. The interpreter
calls its EffectPort through ``LoopBoundEffects``, which runs each call on the serving loop
(fencing, effect ledger, budget reservations, lease checks, psycopg); the engine thread
never touches a database connection. Cancelling the awaiting task asks the interpreter to
stop at its next step (a cooperative checkpoint in the step meter) and cancels whatever the
engine loop awaits; the caller returns only after the engine thread has let go.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from runtime.engine.run.ports import EffectPort, HttpRequest, HttpResponse, McpRequest
from runtime.engine.step_meter import LeaveTheLoop, StepMeter, current_meter, metering

T = TypeVar("T")
# Steps an attempt may take on the serving loop before it starts over on an engine thread.
# A one-task `set` of two CEL fields takes 36 steps, about 0.3 ms; 100 steps hold the loop
# for 1-3 ms at most, and an attempt that outgrows them wastes no more than that.
ON_LOOP_STEPS = 100
Work = Callable[[], Coroutine[Any, Any, T]]

log = logging.getLogger("workflow.engine.threads")


class _Running:
    """The engine-side task of one submission, so the serving side can cancel it."""

    def __init__(self, meter: StepMeter) -> None:
        self.meter = meter
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False

    def attach(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._loop, self._task = loop, task
            if self._cancelled:
                task.cancel()

    def cancel(self) -> None:
        self.meter.request_stop()
        with self._lock:
            self._cancelled = True
            if self._loop is not None and self._task is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)


class EngineThreads:
    """A pool of engine threads; each runs one task attempt at a time on its own loop."""

    def __init__(self, size: int = 16, *, on_loop_steps: int = ON_LOOP_STEPS) -> None:
        # Threads start on demand, so the size only caps concurrent task attempts (the
        # executor's slots, 8 by default, bound them first).
        if size < 1:
            raise ValueError("an engine pool needs at least one thread")
        if on_loop_steps < 0:
            raise ValueError("on_loop_steps must not be negative")
        self._size = size
        self.on_loop_steps = on_loop_steps
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._loops_lock = threading.Lock()

    async def run(self, work: Work[T], meter: StepMeter) -> T:
        """Run ``work()`` metered by ``meter``: on the serving loop while small, else a thread."""
        if self.on_loop_steps > 0:
            meter.on_loop_steps = self.on_loop_steps
            try:
                with metering(meter):
                    return await work()
            except LeaveTheLoop:
                meter.restart()
            finally:
                meter.on_loop_steps = None
        return await self._run_off_loop(work, meter)

    async def _run_off_loop(self, work: Work[T], meter: StepMeter) -> T:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._size, thread_name_prefix="workflow-engine")
        meter.yields_gil = True
        running = _Running(meter)
        loop = asyncio.get_running_loop()
        # The caller's context (its trace span, log fields) reaches the effects the attempt
        # sends back to this loop; run_in_executor alone would start the thread with none.
        context = contextvars.copy_context()
        future = loop.run_in_executor(self._pool, context.run, self._run_here, work, running)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            running.cancel()
            # Nothing of the attempt may outlive its handler: wait until the thread lets go.
            await asyncio.wait([future])
            if not future.cancelled():
                # Read here: the attempt usually ends by the cancellation it was asked for,
                # which asyncio would otherwise log at ERROR as a future's exception that was
                # never retrieved (issue 42 item 7).
                future.exception()
            raise

    def close(self) -> None:
        """Stop the threads and close their loops (call once no task attempt runs)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._loops_lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            loop.close()

    def _run_here(self, work: Work[T], running: _Running) -> T:
        loop = self._thread_loop()
        # The meter is bound in this thread's context; the task (and its fork branches)
        # copy that context when created.
        with metering(running.meter):
            task = loop.create_task(work())
        running.attach(loop, task)
        return loop.run_until_complete(task)

    def _thread_loop(self) -> asyncio.AbstractEventLoop:
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            self._local.loop = loop
            with self._loops_lock:
                self._loops.append(loop)
        return loop


async def on_loop(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on ``loop`` (the serving loop) and await it from this thread's loop.

    Cancelling the awaiting side cancels the coroutine on ``loop`` as well.
    """
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_owned(coroutine), loop))


async def _owned(coroutine: Coroutine[Any, Any, T]) -> T:
    """The coroutine, ending as cancelled when its caller stopped waiting for it.

    Why: a cancelled effect still runs its cleanup (settling its budget reservation, fenced);
    with its lease lost meanwhile, that raises LeaseLost. The caller's future is cancelled
    already, so nobody would read that exception and asyncio logs "Task exception was never
    retrieved" at ERROR (issue 42 item 7). The executor handles the lost lease on its side
    (the job ends with LeaseLost or CancelledError); here it is noted and the task cancelled.
    """
    try:
        return await coroutine
    except BaseException as exc:
        task = asyncio.current_task()
        abandoned = task is not None and task.cancelling() > 0
        if abandoned and not isinstance(exc, asyncio.CancelledError):
            log.info("an effect ended after its caller stopped waiting: %s", type(exc).__name__)
            raise asyncio.CancelledError() from exc
        raise


class LoopBoundEffects:
    """An EffectPort whose calls run on the serving loop, whatever loop the interpreter is on."""

    def __init__(self, inner: EffectPort, loop: asyncio.AbstractEventLoop) -> None:
        self._inner = inner
        self._loop = loop

    async def call_http(self, request: HttpRequest) -> HttpResponse:
        """Send one HTTP request through the serving loop's effect port."""
        _leave_the_loop_before_an_effect()
        return await on_loop(self._loop, self._inner.call_http(request))

    async def call_mcp(self, request: McpRequest) -> dict[str, Any]:
        """Send one MCP tools/call through the serving loop's effect port."""
        _leave_the_loop_before_an_effect()
        return await on_loop(self._loop, self._inner.call_mcp(request))


def _leave_the_loop_before_an_effect() -> None:
    # An attempt tried on the serving loop starts over on a thread before its first effect, so
    # starting over never sends an effect twice (and one with effects is not a small one).
    meter = current_meter()
    if meter is not None and meter.on_loop_steps is not None:
        raise LeaveTheLoop()
