"""The pure model of deadline-aware admission: moving averages, a class's measurements, the
prediction of a new run's queue wait and completion, and the refusal it implies.

Nothing here reads a clock of its own, touches the database or holds process state: the
controller (runtime.admission.controller) owns the measurements and passes the time in.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from runtime.errors import WorkflowError


@dataclass
class Ewma:
    """An exponentially weighted moving average; None until the first sample."""

    alpha: float
    value: float | None = None

    def add(self, sample: float) -> None:
        """Fold one sample in."""
        if self.value is None:
            self.value = sample
        else:
            self.value += self.alpha * (sample - self.value)


@dataclass(frozen=True)
class ClassLoad:
    """One class in the shared queue at one moment: ready (runnable) and running tasks."""

    ready: int = 0
    running: int = 0
    # How long the oldest runnable task has waited: the queue delay actually observed.
    oldest_ready_ms: float = 0.0


@dataclass(frozen=True)
class Estimate:
    """What admission predicts for one new run of a class, in milliseconds."""

    queue_wait_ms: float
    completion_ms: float
    drain_ms_per_task: float
    service_ms: float = 0.0


def estimate(
    load: ClassLoad,
    admitted_since_sample: int,
    local_slots: int,
    service_ms: float,
    claim_ms: float,
    loop_delay_ms: float = 0.0,
    *,
    drain_per_s: float = 0.0,
    standing_ms: float = 0.0,
    admission_ms: float = 0.0,
) -> Estimate:
    """Predicted queue wait and completion of a run enqueued now (pure).

    The backlog drains at the measured completion rate while tasks wait (the executors are
    saturated), else at the larger of that and `busy slots / service time` (busy slots: the
    cluster's running tasks of the class, at least this process's own slots and at least one).
    The wait is at least the standing sojourn and the oldest runnable task's age, which show
    a queue draining slower than that (executors starved of CPU or connections, no worker).
    loop_delay_ms is what this process's event loop adds; admission_ms how long calls take
    from arrival to their admission (connection waits).
    """
    servers = max(load.running, local_slots, 1)
    modelled = servers / service_ms if service_ms > 0 else 0.0
    # With tasks waiting the executors are saturated, so what they finished is what they can
    # finish; otherwise the completion rate only shows demand and the slots are the bound.
    measured = drain_per_s / 1000
    rate_per_ms = measured if load.ready > 0 and measured > 0 else max(modelled, measured)
    drain = 1 / rate_per_ms if rate_per_ms > 0 else service_ms
    queued = max(0, load.ready + admitted_since_sample)
    # While a call waits to be admitted the executors drain the queue ahead of it: the two
    # waits overlap, so the longer one counts, not their sum.
    wait = max(queued * drain, standing_ms, load.oldest_ready_ms, admission_ms) + loop_delay_ms
    return Estimate(wait, claim_ms + wait + service_ms, drain, service_ms)


def refusal_ms(
    predicted: Estimate,
    budget_ms: float | None,
    queue_wait_limit_ms: float | None,
    safety_factor: float,
) -> float | None:
    """How much too slow the prediction is for the budget or the queue-wait limit (None: fits)."""
    excess = 0.0
    if budget_ms is not None:
        excess = max(excess, predicted.completion_ms * safety_factor - budget_ms)
    if queue_wait_limit_ms is not None:
        excess = max(excess, predicted.queue_wait_ms * safety_factor - queue_wait_limit_ms)
    return excess if excess > 0 else None


def retry_after_ms(excess_ms: float, safety_factor: float, low: int, high: int) -> int:
    """The wait until the queue has drained by the excess (the excess is in scaled time)."""
    return int(min(high, max(low, math.ceil(excess_ms / safety_factor))))


def capacity_exhausted(execution_class: str, retry_after: int) -> WorkflowError:
    """The typed refusal: retryable, nothing was accepted."""
    return WorkflowError(
        "WORKFLOW_CAPACITY_EXHAUSTED",
        f"the {execution_class} class cannot finish this call within its deadline right now",
        retry_after_ms=retry_after,
    )


@dataclass
class SlidingMin:
    """The minimum of the values recorded over the last interval (0 when none was)."""

    interval_s: float
    # (recorded at, value), values increasing from the front: the front is the minimum over
    # the interval (a monotonic queue, amortized O(1) per value).
    _values: deque[tuple[float, float]] = field(init=False, default_factory=deque)

    def record(self, now: float, value: float) -> None:
        """One measurement."""
        values = self._values
        while values and values[-1][1] >= value:
            values.pop()
        values.append((now, value))
        self._expire(now)

    def value(self, now: float) -> float:
        """The minimum over the interval ending now."""
        self._expire(now)
        return self._values[0][1] if self._values else 0.0

    def _expire(self, now: float) -> None:
        values, horizon = self._values, now - self.interval_s
        while values and values[0][0] < horizon:
            values.popleft()


# A call past the check counts as queued for at least this long (s) unless admitted sooner.
PENDING_MIN_S = 0.05

# Fewer completions than this in the drain window are no evidence of a rate.
MIN_COMPLETIONS = 10


@dataclass
class ClassController:
    """One execution class's measurements in this process; every method takes the clock."""

    interval_s: float = 0.1
    window_s: float = 1.0
    alpha: float = 0.1
    buckets: int = 10
    service: Ewma = field(init=False)
    sojourn: SlidingMin = field(init=False)
    _counts: list[int] = field(init=False)
    _bucket: int = field(init=False, default=0)
    _total: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.service = Ewma(self.alpha)
        self.sojourn = SlidingMin(self.interval_s)
        self._counts = [0] * self.buckets

    def record_sojourn(self, now: float, sojourn_ms: float) -> None:
        """A queued task was claimed after waiting sojourn_ms."""
        self.sojourn.record(now, sojourn_ms)

    def standing_ms(self, now: float) -> float:
        """The minimum sojourn of the tasks claimed over the last interval (0: none claimed)."""
        return self.sojourn.value(now)

    def record_completion(self, now: float, service_s: float) -> None:
        """A run's job ended service_s after its claim."""
        self.service.add(service_s * 1000)
        self._advance(now)
        self._counts[self._bucket % self.buckets] += 1
        self._total += 1

    def drain_per_s(self, now: float) -> float:
        """Completions per second over the window."""
        self._advance(now)
        return self._total / self.window_s

    def _advance(self, now: float) -> None:
        bucket = int(now * self.buckets / self.window_s)
        gap = bucket - self._bucket
        if gap <= 0:
            return
        counts = self._counts
        for step in range(1, min(gap, self.buckets) + 1):
            index = (self._bucket + step) % self.buckets
            self._total -= counts[index]
            counts[index] = 0
        self._bucket = bucket
