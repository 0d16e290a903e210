"""Deadline-aware admission: refuse a run that cannot finish in time, before anything is written.

Seed 001 "Capacity And Availability" / "Interactive Execution Class And Scheduling": admission
uses measured queue depth, claim latency, service time and the class's slots, and refuses with
WORKFLOW_CAPACITY_EXHAUSTED and retryAfterMs when the remaining deadline cannot be met.

Nothing here touches the database on the admission path. Per process (one estimator):

- the executor records each claim round trip and each task's service time (EWMAs per class);
- a background sampler (runtime.scheduler.capacity_sampler) reads the ready and running task
  counts per class from the shared queue every `sample_interval_ms`;
- admission predicts `claim latency + queued work / busy slots + one service time` for its
  class and compares it with the call's budget and the class's queue-wait objective.

Several service processes on one database: queue depth and running counts come from the
shared table, so every process sees the whole cluster's backlog and busy slots; the
drain rate is (cluster running tasks) / (this process's measured service time), which holds
while processes are alike. Admissions a process made since its last sample are added to the
sampled depth; other processes' admissions show up at the next sample (<= one interval late).
Without a fresh sample (sampler not running, database unreachable) admission is not refused
here: shedding is an optimisation, the durable admission rules stay the safety net.

Classes are independent: a batch (or standard) backlog never counts against interactive
admission, which keeps the interactive class's reserved slots (seed 001).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import msgspec

from runtime.errors import WorkflowError
from runtime.scheduler.models import EXECUTION_CLASSES, ExecutionClass
from runtime.telemetry import metrics


class CapacitySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The `capacity` section: deadline-aware admission (load shedding) and its sampler."""

    # Off: admission never refuses on measured load (the Tool's admission limits still apply).
    enabled: bool = True
    # Predicted completion times this factor must fit the budget (>1 refuses earlier).
    safety_factor: float = 1.5
    # Interactive calls are refused when the expected queue wait alone exceeds this, whatever
    # the Tool's own syncWaitMs: an agent is better served by a fast retryAfterMs than by
    # waiting behind seconds of queue. None: only the call's deadline counts.
    interactive_queue_wait_ms: int | None = 1000
    # retryAfterMs is the predicted time until the queue is short enough, clamped to this range.
    retry_after_min_ms: int = 100
    retry_after_max_ms: int = 5000
    # How often each process samples the queue, and when a sample is too old to act on.
    sample_interval_ms: int = 50
    stale_after_ms: int = 1000
    # Service time assumed per task before this process has measured any (ms).
    default_service_ms: float = 20.0
    # Weight of the newest measurement in the moving averages.
    ewma_alpha: float = 0.1
    # Event-loop turns a call waits through (round trips, wake-ups); each is delayed by the
    # loop lag the sampler measures, so a CPU-starved process predicts (and sheds) sooner.
    loop_lag_turns: int = 10

    def __post_init__(self) -> None:
        if self.safety_factor <= 0 or not 0 < self.ewma_alpha <= 1:
            raise ValueError("capacity: safety_factor must be > 0 and ewma_alpha in (0, 1]")
        if not 0 < self.retry_after_min_ms <= self.retry_after_max_ms:
            raise ValueError("capacity: need 0 < retry_after_min_ms <= retry_after_max_ms")
        if self.sample_interval_ms <= 0 or self.stale_after_ms < self.sample_interval_ms:
            raise ValueError("capacity: need 0 < sample_interval_ms <= stale_after_ms")


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


def estimate(
    load: ClassLoad,
    admitted_since_sample: int,
    local_slots: int,
    service_ms: float,
    claim_ms: float,
    loop_delay_ms: float = 0.0,
) -> Estimate:
    """Predicted queue wait and completion of a run enqueued now (pure).

    The queue drains at `busy slots / service time`; busy slots are the cluster's running
    tasks of the class, at least this process's own slots and at least one. When the queue
    drains slower than that (executors starved of CPU or connections), the oldest runnable
    task's age shows it: the wait is the larger of the two. loop_delay_ms is what this
    process's own event loop adds (its lag times the turns a call waits through).
    """
    servers = max(load.running, local_slots, 1)
    queued = load.ready + admitted_since_sample
    drain = service_ms / servers
    wait = max(queued * drain, load.oldest_ready_ms) + loop_delay_ms
    return Estimate(wait, claim_ms + wait + service_ms, drain)


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
class CapacityEstimator:
    """One process's view of executor capacity: its measurements and the latest queue sample."""

    settings: CapacitySettings = field(default_factory=CapacitySettings)
    slots: dict[str, int] = field(default_factory=dict)
    service: dict[str, Ewma] = field(default_factory=dict)
    claim: Ewma | None = None
    loop_lag: Ewma | None = None
    load: dict[str, ClassLoad] = field(default_factory=dict)
    sampled_at: float | None = None
    admitted_since_sample: dict[str, int] = field(default_factory=dict)

    def configure(self, settings: CapacitySettings, slots: dict[str, int] | None = None) -> None:
        """Apply settings and (when this process executes tasks) its slots per class."""
        self.settings = settings
        if slots is not None:
            self.slots = dict(slots)

    def record_claim(self, seconds: float) -> None:
        """One claim round trip of this process's executor."""
        if self.claim is None:
            self.claim = Ewma(self.settings.ewma_alpha)
        self.claim.add(seconds * 1000)

    def record_service(self, execution_class: str, seconds: float) -> None:
        """One task's service time (claim to completion) in this process's executor."""
        average = self.service.setdefault(execution_class, Ewma(self.settings.ewma_alpha))
        average.add(seconds * 1000)

    def record_loop_lag(self, seconds: float) -> None:
        """How late this process's event loop woke the sampler (its CPU saturation)."""
        if self.loop_lag is None:
            self.loop_lag = Ewma(self.settings.ewma_alpha)
        self.loop_lag.add(max(0.0, seconds) * 1000)

    def record_sample(self, load: dict[str, ClassLoad], at: float | None = None) -> None:
        """A fresh reading of the shared queue (resets this process's own admission counts)."""
        self.load = dict(load)
        self.sampled_at = time.monotonic() if at is None else at
        self.admitted_since_sample.clear()

    def predict(self, execution_class: str) -> Estimate | None:
        """The prediction for a run of the class now; None without a fresh sample."""
        now = time.monotonic()
        if self.sampled_at is None or now - self.sampled_at > self.settings.stale_after_ms / 1000:
            return None
        service = self.service.get(execution_class)
        service_ms = service.value if service is not None and service.value is not None else None
        claim_ms = self.claim.value if self.claim is not None and self.claim.value else 0.0
        lag_ms = self.loop_lag.value if self.loop_lag is not None and self.loop_lag.value else 0.0
        return estimate(
            self.load.get(execution_class, ClassLoad()),
            self.admitted_since_sample.get(execution_class, 0),
            self.slots.get(execution_class, 0),
            service_ms if service_ms is not None else self.settings.default_service_ms,
            claim_ms,
            lag_ms * self.settings.loop_lag_turns,
        )

    def admit(self, execution_class: str, budget_ms: float | None = None) -> None:
        """Refuse (WORKFLOW_CAPACITY_EXHAUSTED, retryAfterMs) a run that cannot finish in time."""
        settings = self.settings
        if not settings.enabled or execution_class not in EXECUTION_CLASSES:
            return
        predicted = self.predict(execution_class)
        if predicted is not None:
            limit = settings.interactive_queue_wait_ms if execution_class == "interactive" else None
            excess = refusal_ms(predicted, budget_ms, limit, settings.safety_factor)
            if excess is not None:
                raise capacity_exhausted(
                    execution_class,
                    retry_after_ms(
                        excess,
                        settings.safety_factor,
                        settings.retry_after_min_ms,
                        settings.retry_after_max_ms,
                    ),
                )
        counts = self.admitted_since_sample
        counts[execution_class] = counts.get(execution_class, 0) + 1


# One estimator per process: it describes this process's executor and its view of the queue.
ESTIMATOR = CapacityEstimator()


def check(execution_class: ExecutionClass) -> None:
    """The cheap first shed at the start of admission: the class's queue-wait objective only."""
    settings = ESTIMATOR.settings
    if not settings.enabled or execution_class != "interactive":
        return
    predicted = ESTIMATOR.predict(execution_class)
    if predicted is None:
        return
    excess = refusal_ms(predicted, None, settings.interactive_queue_wait_ms, settings.safety_factor)
    if excess is not None:
        raise capacity_exhausted(
            execution_class,
            retry_after_ms(
                excess,
                settings.safety_factor,
                settings.retry_after_min_ms,
                settings.retry_after_max_ms,
            ),
        )


def admit(execution_class: ExecutionClass, budget_ms: float | None = None) -> None:
    """Deadline-aware admission of one new run (no database access); counts it as queued."""
    ESTIMATOR.admit(execution_class, budget_ms)


def record_claim(seconds: float) -> None:
    """The executor's claim round trip."""
    ESTIMATOR.record_claim(seconds)
    metrics.observe_claim(seconds)


def record_service(execution_class: str, seconds: float) -> None:
    """One task's time in an executor slot (claim to completion)."""
    ESTIMATOR.record_service(execution_class, seconds)
    metrics.observe_service(execution_class, seconds)


def reset(settings: CapacitySettings | None = None) -> CapacityEstimator:
    """Forget all measurements (tests; a process re-configuring itself)."""
    global ESTIMATOR
    ESTIMATOR = CapacityEstimator(settings or CapacitySettings())
    return ESTIMATOR
