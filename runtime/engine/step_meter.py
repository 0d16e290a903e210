"""The deterministic step meter: one count of a task attempt's work, against its step budget.

Steps are CEL evaluation steps plus one per task the interpreter runs (loop iterations run
tasks, so they count too). The count depends only on the definition, its input and the
checkpoint it resumes from, never on the clock or the machine, so the same task attempt
always stops at the same step: a CPU bound that is also deterministic (seed 001: wall-clock
timeouts are no substitute for deterministic evaluation-cost limits).

The meter is also the interpreter's cooperative checkpoint: a task that runs off the event
loop (see ``runtime.engine.run.engine_threads``) is asked to stop through ``request_stop``
and stops at its next step, because pure CPU work never reaches an ``await`` where
cancellation lands.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar


class StepBudgetExhausted(Exception):
    """The task attempt spent more steps than its budget.

    Not a WorkflowFault on purpose: a try/catch in the definition cannot swallow it and go on
    computing; it ends the run (WORKFLOW_BUDGET_EXHAUSTED).
    """

    def __init__(self, limit: int) -> None:
        super().__init__(f"the task spent more than its {limit} evaluation steps")
        self.limit = limit


class MemoryBudgetExhausted(StepBudgetExhausted):
    """The task attempt built more bytes of values than its memory ceiling.

    A StepBudgetExhausted, so every place that ends a run on an exhausted budget ends it here
    too (WORKFLOW_BUDGET_EXHAUSTED on the first attempt, never retried).
    """

    def __init__(self, byte_limit: int) -> None:
        Exception.__init__(self, f"the task built more than {byte_limit} bytes of values")
        self.limit = byte_limit
        self.byte_limit = byte_limit


class StopRequested(Exception):
    """The owner of the task asked it to stop (cancelled, lease lost, shutting down)."""


class LeaveTheLoop(StopRequested):
    """An attempt tried on the serving loop outgrew it: it is run again, from its start, off it.

    Raised at the step past the loop's allowance, or before the attempt's first effect (an
    effect must not be sent twice, and only an attempt that sent none may start over).
    """


# A task off the serving loop hands the GIL over this often (in steps, about a millisecond of
# interpreter work): the loop then waits for the GIL that long at most, instead of the
# interpreter's 5 ms switch interval on every wake-up.
YIELD_EVERY_STEPS = 32

# The bytes of values (strings, lists, maps) one task attempt may build in CEL. Counted from the
# values themselves, not measured from the process, so the ceiling is deterministic too: a
# comprehension that multiplies a large input stops at the same element on every machine.
DEFAULT_BYTE_LIMIT = 16 * 1024 * 1024


class StepMeter:
    """Counts the steps of one task attempt; ``limit`` None counts without a bound."""

    def __init__(self, limit: int | None = None, byte_limit: int = DEFAULT_BYTE_LIMIT) -> None:
        if limit is not None and limit < 0:
            raise ValueError("a step limit must be non-negative")
        if byte_limit < 0:
            raise ValueError("a byte limit must be non-negative")
        self.limit = limit
        self.byte_limit = byte_limit
        self.steps = 0
        self.bytes_built = 0
        # Set by the engine pool: this attempt runs off the serving loop and yields the GIL.
        self.yields_gil = False
        # Set by the engine pool while the attempt is tried on the serving loop: the steps it
        # may take there (None: it is not on the serving loop).
        self.on_loop_steps: int | None = None
        self._next_yield = YIELD_EVERY_STEPS
        # Set from another thread; read at every step (an Event read is cheap and atomic).
        self._stop = threading.Event()

    def remaining(self) -> int | None:
        """Steps left before the budget is exhausted (None: unbounded)."""
        return None if self.limit is None else max(self.limit - self.steps, 0)

    def remaining_bytes(self) -> int:
        """Bytes of values the attempt may still build."""
        return max(self.byte_limit - self.bytes_built, 0)

    def charge_bytes(self, size: int) -> None:
        """Add built bytes; raise once the memory ceiling is exceeded."""
        self.bytes_built += size
        if self.bytes_built > self.byte_limit:
            raise MemoryBudgetExhausted(self.byte_limit)

    def charge(self, steps: int) -> None:
        """Add steps; raise once the budget is exceeded or a stop was requested."""
        self.steps += steps
        if self.limit is not None and self.steps > self.limit:
            raise StepBudgetExhausted(self.limit)
        if self._stop.is_set():
            raise StopRequested()
        if self.on_loop_steps is not None and self.steps > self.on_loop_steps:
            raise LeaveTheLoop()
        if self.yields_gil and self.steps >= self._next_yield:
            self._next_yield = self.steps + YIELD_EVERY_STEPS
            time.sleep(0)  # releases the GIL: a waiting serving loop takes it now

    def restart(self) -> None:
        """Count from zero again: the attempt starts over (off the serving loop)."""
        self.steps = 0
        self.bytes_built = 0
        self._next_yield = YIELD_EVERY_STEPS

    @property
    def stop_event(self) -> threading.Event:
        """Set when a stop was requested (CEL evaluation checks it at every node)."""
        return self._stop

    def request_stop(self) -> None:
        """Ask the task to stop at its next step (thread-safe)."""
        self._stop.set()


_METER: ContextVar[StepMeter | None] = ContextVar("workflow_step_meter", default=None)


@contextlib.contextmanager
def metering(meter: StepMeter) -> Iterator[StepMeter]:
    """Charge every step in this context (fork branches included) to ``meter``."""
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


def current_meter() -> StepMeter | None:
    """The meter of the running task attempt, if any."""
    return _METER.get()


def charge_steps(steps: int) -> None:
    """Charge steps to the current meter (nothing when none is active)."""
    meter = _METER.get()
    if meter is not None:
        meter.charge(steps)
