"""Deadline-aware admission: refuse a run that cannot finish in time, before anything is written.

Seed 001 "Capacity And Availability" / "Interactive Execution Class And Scheduling": admission
uses measured queue depth, oldest runnable age, claim latency, service time and the class's
slots, and rejects before acceptance when the remaining deadline cannot be met.

Nothing here touches the database, takes a lock or allocates much on the admission path. Per
process, one controller per execution class holds what was measured:

- sojourn: each claim of a queued task reports how long it waited (enqueue to claim, by the
  database clock); the controller keeps the minimum over the last `sojourn_interval_ms`. As in
  CoDel, the minimum ignores a burst that drains and shows a standing queue: every task claimed
  in the interval waited at least that long;
- service: each executor job reports claim to completion of the run's chained tasks (EWMA);
- drain: completions per second of the class over `drain_window_ms` (a ring of buckets);
- load: a background sampler (runtime.scheduler.capacity_sampler) reads the ready and running
  task counts of the shared queue and the oldest runnable age every `sample_interval_ms`.

A new run of the class is predicted to wait the longest of: the backlog ahead over the drain
rate (the measured completion rate while tasks wait, else the larger of that and busy slots /
service time, so an idle class's low completion rate is not mistaken for low capacity), the
standing sojourn, the oldest runnable age (a stalled queue) and this process's standing wait
from arrival to admission (connection waits: they overlap the queue's drain); then one service
time. The call is refused, with WORKFLOW_CAPACITY_EXHAUSTED, only when that times
`safety_factor` exceeds its remaining deadline; retryAfterMs is the time the backlog needs to
drain to a level that fits a fresh call of the same budget. There is no fixed queue-wait
objective unless an operator opts in (`interactive_queue_wait_ms`).

workflow_invoke decides before any database round trip (`check_invoke`): the Tool's budget
and class come from a small per-process table filled by its earlier admissions (keyed by host,
Tool and binding digest, so a new revision is never judged by an old budget). Calls past that
check count as queued ahead of later ones until their admission (`admit`, inside the
transaction) settles them; `admit` judges the call again with the time it has left, and is the
only judgement for a Tool this process has not admitted yet.

Several service processes on one database: queue depth, running counts and the oldest age come
from the shared table, so every process sees the whole cluster's backlog and busy slots;
admissions a process made since its last sample are added to the sampled depth, its own claims
since then taken off; other processes' show up at the next sample (<= one interval late).
Without a fresh sample (sampler not running or starved, database unreachable) the shared
backlog is not counted, but this process's own measurements (sojourn, service, arrival to
admission, loop lag) still are; with none of those nothing is refused here. Shedding is an
optimisation, the durable admission rules stay the safety net.

Classes are independent: a batch (or standard) backlog never counts against interactive
admission, which keeps the interactive class's reserved slots (seed 001).
"""

from __future__ import annotations

import contextvars
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from runtime.errors import WorkflowError
from runtime.scheduler.models import EXECUTION_CLASSES, ExecutionClass
from runtime.telemetry import metrics


class CapacitySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The `capacity` section: deadline-aware admission (load shedding) and its sampler."""

    # Off: admission never refuses on measured load (the Tool's admission limits still apply).
    enabled: bool = True
    # Predicted completion times this factor must fit the remaining deadline (>1 refuses
    # earlier, leaving room for what the prediction misses: the response, a slower backend).
    safety_factor: float = 1.5
    # Opt-in: also refuse interactive calls whose predicted queue wait alone exceeds this,
    # whatever their deadline. None (the default): only the call's deadline counts (seed 001).
    interactive_queue_wait_ms: int | None = None
    # retryAfterMs is the predicted time until the backlog fits, clamped to this range.
    retry_after_min_ms: int = 50
    retry_after_max_ms: int = 5000
    # How often each process samples the queue, and when a sample is too old to act on.
    sample_interval_ms: int = 50
    stale_after_ms: int = 1000
    # The standing sojourn is the minimum queue wait of the tasks claimed over this interval.
    sojourn_interval_ms: int = 100
    # Completions per second are counted over this window.
    drain_window_ms: int = 1000
    # Service time assumed per run before this process has measured any (ms).
    default_service_ms: float = 20.0
    # Weight of the newest measurement in the moving averages.
    ewma_alpha: float = 0.1
    # Event-loop turns added to the prediction at the loop lag the sampler measures. The
    # measured waits (sojourn, arrival to admission) already include the lag of the turns
    # they span; one turn stands for the answer's own, more double-counts it and sheds calls
    # that fit (10 turns refused a quarter of the calls at 50 closed-loop callers).
    loop_lag_turns: int = 1
    # Tools whose budgets this process remembers for the pre-transaction check.
    budget_cache_size: int = 4096
    # Calls past the front door whose run has not started, at most (runtime.scheduler.door);
    # the others wait in arrival order. 0: no door. As many as the interactive slots: a run
    # that waits for a free slot keeps its place, so fewer places starve the executor (2
    # places took bench-invoke's closed loops from 188 to 131 ok/s, 10 callers, and 230 to
    # 156, 50; docs/PERFORMANCE.md). Earlier, 16 against 32 took c=50 from 362 to 428 ok/s.
    door_concurrency: int = 16
    # Of those, calls whose admission is not decided yet, at most (0: no bound of its own): the
    # work that delays refusals on the event loop. One Tool at up to 4x its capacity (bench-
    # refusals, alternating): refusal p50 10-15 ms with 16, 5-8 ms with 4, 2-3 ms with 2, and
    # 4 and 2 served 10-35% more than 16; bench-invoke's closed loops: 4 as 16, 2 below 4.
    door_admitting: int = 4
    # The door's queue target (CoDel-style): once the oldest waiting call has waited longer,
    # a call predicted to wait longer still is refused on arrival. None: only deadlines count.
    # One Tool at 2x its peak (bench-peers, same session, fresh databases): 300 ms kept 76-80%
    # of the peak with admitted p50 0.5 s and p99 1.0-1.2 s; 2 s kept 60-78% with p50 2.6-3.3 s
    # and p99 5-6 s (the standing queue is the wait every admitted call pays).
    door_queue_target_ms: int | None = 300
    # Admission statements one Tool may have in flight at once in this process; its calls that
    # arrive meanwhile wait and then go together, up to 8 in one statement and commit
    # (runtime.invocation.admission_batch). One Tool, closed c=10 then open at 2x, six rounds
    # each, alternating (docs/PERFORMANCE.md): 1 served a median 497 and 430 ok/s with
    # refusals at p99 6-8 ms; 2 served 491 and 418 (p99 10-44 ms); 64 (no batch) 468 and 406.
    admission_statements_per_tool: int = 1
    # One-statement task completions this process has in flight at once; the ones that end
    # meanwhile wait and go together, up to 16 in one statement and commit
    # (runtime.scheduler.service). One Tool at 2x its capacity, six rounds each, alternating
    # (docs/PERFORMANCE.md): 4 served a median 472 ok/s (0.91-0.97 of the peak in that run,
    # 0.80-0.93 in a slower one later); no batch (64) 450; 2 only 426 and 1 swung from 357 to
    # 535 (one statement at a time left the machine a quarter idle: completions queued behind
    # each commit's flush).
    completion_statements: int = 4

    def __post_init__(self) -> None:
        if self.safety_factor <= 0 or not 0 < self.ewma_alpha <= 1:
            raise ValueError("capacity: safety_factor must be > 0 and ewma_alpha in (0, 1]")
        if not 0 < self.retry_after_min_ms <= self.retry_after_max_ms:
            raise ValueError("capacity: need 0 < retry_after_min_ms <= retry_after_max_ms")
        if self.sample_interval_ms <= 0 or self.stale_after_ms < self.sample_interval_ms:
            raise ValueError("capacity: need 0 < sample_interval_ms <= stale_after_ms")
        if self.sojourn_interval_ms <= 0 or self.drain_window_ms <= 0:
            raise ValueError("capacity: sojourn_interval_ms and drain_window_ms must be > 0")
        if self.door_concurrency < 0 or self.door_admitting < 0:
            raise ValueError("capacity: door_concurrency and door_admitting must not be negative")
        if self.admission_statements_per_tool < 1 or self.completion_statements < 1:
            raise ValueError(
                "capacity: admission_statements_per_tool and completion_statements must be >= 1"
            )
        if self.door_queue_target_ms is not None and self.door_queue_target_ms <= 0:
            raise ValueError("capacity: door_queue_target_ms must be positive (or null)")


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


class _Pending:
    """One call past the pre-transaction check: when it arrived, its class, whether admitted."""

    __slots__ = ("arrived_at", "done", "execution_class")

    def __init__(self, arrived_at: float, execution_class: str | None) -> None:
        self.arrived_at = arrived_at
        self.execution_class = execution_class
        self.done = execution_class is None


@dataclass
class CapacityEstimator:
    """One process's view of executor capacity: its measurements and the latest queue sample."""

    settings: CapacitySettings = field(default_factory=CapacitySettings)
    slots: dict[str, int] = field(default_factory=dict)
    claim: Ewma | None = None
    loop_lag: Ewma | None = None
    load: dict[str, ClassLoad] = field(default_factory=dict)
    sampled_at: float | None = None
    admitted_since_sample: dict[str, int] = field(default_factory=dict)
    # Arrival to admission of this process's invokes: the wait for a connection and the
    # admission transaction, which the task queue does not see (minimum over an interval).
    admission: SlidingMin = field(init=False)
    # Calls past the pre-transaction check and not yet admitted (waiting for a connection):
    # they will be queued ahead of a call arriving now.
    pending: deque[_Pending] = field(default_factory=deque)
    inflight: dict[str, int] = field(default_factory=dict)
    claimed_since_sample: dict[str, int] = field(default_factory=dict)
    classes: dict[str, ClassController] = field(default_factory=dict)
    # (host, Tool, binding digest) -> (class, budget ms) of the revisions this process admitted.
    budgets: dict[tuple[str, str, str], tuple[ExecutionClass, float]] = field(default_factory=dict)
    # The longest of those budgets (ms), for the front door.
    longest_budget: float | None = None
    # The monotonic clock; tests inject a deterministic one.
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.admission = SlidingMin(self.settings.sojourn_interval_ms / 1000)

    @property
    def service(self) -> dict[str, Ewma]:
        """The service-time average of each class measured so far."""
        return {name: c.service for name, c in self.classes.items() if c.service.value is not None}

    def now(self) -> float:
        """The current time of the estimator's clock (seconds)."""
        return self.clock()

    def controller(self, execution_class: str) -> ClassController:
        """The class's controller (created on first use)."""
        found = self.classes.get(execution_class)
        if found is None:
            settings = self.settings
            found = ClassController(
                settings.sojourn_interval_ms / 1000,
                settings.drain_window_ms / 1000,
                settings.ewma_alpha,
            )
            self.classes[execution_class] = found
        return found

    def configure(self, settings: CapacitySettings, slots: dict[str, int] | None = None) -> None:
        """Apply settings and (when this process executes tasks) its slots per class."""
        if settings is not self.settings:
            self.classes.clear()
            self.admission = SlidingMin(settings.sojourn_interval_ms / 1000)
        self.settings = settings
        if slots is not None:
            self.slots = dict(slots)

    def record_claim(self, seconds: float) -> None:
        """One claim round trip of this process's executor."""
        if self.claim is None:
            self.claim = Ewma(self.settings.ewma_alpha)
        self.claim.add(seconds * 1000)

    def record_sojourn(self, execution_class: str, sojourn_ms: float) -> None:
        """A queued task of the class claimed here after waiting sojourn_ms since enqueue."""
        self.controller(execution_class).record_sojourn(self.now(), max(0.0, sojourn_ms))
        counts = self.claimed_since_sample
        counts[execution_class] = counts.get(execution_class, 0) + 1

    def record_service(self, execution_class: str, seconds: float) -> None:
        """One run's time in an executor slot here (claim to completion): service and drain."""
        self.controller(execution_class).record_completion(self.now(), seconds)

    def record_loop_lag(self, seconds: float) -> None:
        """How late this process's event loop woke the sampler (its CPU saturation)."""
        if self.loop_lag is None:
            self.loop_lag = Ewma(self.settings.ewma_alpha)
        self.loop_lag.add(max(0.0, seconds) * 1000)

    def record_sample(self, load: dict[str, ClassLoad], at: float | None = None) -> None:
        """A fresh reading of the shared queue (resets this process's own counts since)."""
        self.load = dict(load)
        self.sampled_at = self.now() if at is None else at
        self.admitted_since_sample.clear()
        self.claimed_since_sample.clear()

    def predict(
        self, execution_class: str, now: float | None = None, *, arriving: bool = True
    ) -> Estimate | None:
        """The prediction for a run of the class now; None when nothing is known.

        Without a fresh sample the shared backlog is unknown, but what this process measured
        itself still counts: under overload the sampler is starved along with everything
        else, and admitting everything then is how goodput collapses. With neither, None.
        arriving: the call has yet to be admitted (so it will wait as long as others did).
        """
        now = self.now() if now is None else now
        settings = self.settings
        fresh = (
            self.sampled_at is not None and now - self.sampled_at <= settings.stale_after_ms / 1000
        )
        controller = self.controller(execution_class)
        service_ms = controller.service.value
        if not fresh and service_ms is None:
            return None
        claim_ms = self.claim.value if self.claim is not None and self.claim.value else 0.0
        lag_ms = self.loop_lag.value if self.loop_lag is not None and self.loop_lag.value else 0.0
        ahead = self.admitted_since_sample.get(execution_class, 0) - self.claimed_since_sample.get(
            execution_class, 0
        )
        drain = controller.drain_per_s(now)
        if arriving:
            ahead = (ahead if fresh else 0) + self.inflight.get(execution_class, 0)
        elif not fresh:
            ahead = 0
        return estimate(
            self.load.get(execution_class, ClassLoad()) if fresh else ClassLoad(),
            ahead,
            self.slots.get(execution_class, 0),
            service_ms if service_ms is not None else settings.default_service_ms,
            claim_ms,
            lag_ms * settings.loop_lag_turns,
            admission_ms=self.admission.value(now) if arriving else 0.0,
            drain_per_s=drain if drain * controller.window_s >= MIN_COMPLETIONS else 0.0,
            standing_ms=controller.standing_ms(now),
        )

    def decide(
        self,
        execution_class: str,
        budget_ms: float | None,
        elapsed_ms: float = 0.0,
        *,
        arriving: bool = True,
    ) -> int | None:
        """retryAfterMs when a run of the class cannot finish in budget_ms - elapsed_ms, else None.

        The retry is a fresh call with the whole budget, so retryAfterMs is the time the
        backlog needs to drain until the prediction fits budget_ms: the excess over it,
        in unscaled time (the backlog drains at the predicted rate meanwhile).
        """
        settings = self.settings
        if not settings.enabled or execution_class not in EXECUTION_CLASSES:
            return None
        predicted = self.predict(execution_class, arriving=arriving)
        if predicted is None:
            return None
        limit = settings.interactive_queue_wait_ms if execution_class == "interactive" else None
        remaining = None if budget_ms is None else budget_ms - elapsed_ms
        if budget_ms is not None and predicted.service_ms * settings.safety_factor >= budget_ms:
            # The class's runs take longer than this Tool's whole budget even on an idle queue
            # (the average mixes Tools): more capacity would not help, so it is not refused
            # for capacity, and one slow spell cannot lock a quick Tool out.
            budget_ms = remaining = None
        if refusal_ms(predicted, remaining, limit, settings.safety_factor) is None:
            return None
        excess = refusal_ms(predicted, budget_ms, limit, settings.safety_factor) or 0.0
        return retry_after_ms(
            excess, settings.safety_factor, settings.retry_after_min_ms, settings.retry_after_max_ms
        )

    def admit(
        self,
        execution_class: str,
        budget_ms: float | None = None,
        key: tuple[str, str, str] | None = None,
    ) -> None:
        """Refuse (WORKFLOW_CAPACITY_EXHAUSTED, retryAfterMs) a run that cannot finish in time.

        With key (an invoke's host, Tool and binding digest) the budget is remembered for the
        next call's pre-transaction check. A call that passed that check is judged again
        here with what it has left: one that waited out its deadline for a connection is
        refused (rolled back) rather than queued to time out.
        """
        arrival, waited_ms = _ARRIVAL.get(), 0.0
        if arrival is not None and arrival[0] is self:
            _ARRIVAL.set(None)
            now = self.now()
            waited_ms = max(0.0, now - arrival[1].arrived_at) * 1000
            self.admission.record(now, waited_ms)
            self._settle(arrival[1])
        # Inside admission the call has already waited to be admitted: that is spent.
        retry_after = self.decide(execution_class, budget_ms, waited_ms, arriving=False)
        if retry_after is not None:
            raise capacity_exhausted(execution_class, retry_after)
        known = key is None or key in self.budgets
        if not known and budget_ms is not None and execution_class in EXECUTION_CLASSES:
            self._remember(key, execution_class, budget_ms)  # type: ignore[arg-type]
        counts = self.admitted_since_sample
        counts[execution_class] = counts.get(execution_class, 0) + 1

    def _settle(self, pending: _Pending) -> None:
        if not pending.done:
            pending.done = True
            name = pending.execution_class or ""
            self.inflight[name] = self.inflight.get(name, 1) - 1

    def _expire_pending(self, now: float) -> None:
        # Calls that never reach admission (a re-attach, a replay, an error) stop counting once
        # an admitted one would have been admitted: after a few times the current wait to be
        # admitted (at least 50 ms, at most stale_after_ms).
        waited_s = self.admission.value(now) / 1000
        keep_s = min(self.settings.stale_after_ms / 1000, max(PENDING_MIN_S, 3 * waited_s))
        pending, horizon = self.pending, now - keep_s
        while pending and (pending[0].done or pending[0].arrived_at < horizon):
            self._settle(pending.popleft())

    def _remember(self, key: tuple[str, str, str], cls: ExecutionClass, budget: float) -> None:
        budgets = self.budgets
        if len(budgets) >= self.settings.budget_cache_size:
            # Bounded without bookkeeping: forgetting only costs one in-transaction decision.
            budgets.clear()
            self.longest_budget = None
        budgets[key] = (cls, budget)
        self.longest_budget = max(budget, self.longest_budget or 0.0)

    def longest_budget_ms(self) -> float | None:
        """The longest budget of the Tools this process remembers (None: it knows none)."""
        return self.longest_budget

    def check_invoke(
        self, host_id: str, stable_tool_ref: str, binding_digest: str | None, arrived_at: float
    ) -> None:
        """The pre-transaction shed of workflow_invoke: O(1), no database, no lock."""
        if not self.settings.enabled:
            return
        now = self.now()
        self._expire_pending(now)
        known = self.budgets.get((host_id, stable_tool_ref, binding_digest or ""))
        if known is None:
            # An unknown Tool (or revision) is judged inside admission, where its budget is read.
            execution_class: ExecutionClass = "interactive"
            budget_ms: float | None = None
            if self.settings.interactive_queue_wait_ms is None:
                # Its admission still measures arrival to admission.
                _ARRIVAL.set((self, _Pending(arrived_at, None)))
                return
        else:
            execution_class, budget_ms = known
        retry_after = self.decide(execution_class, budget_ms, (now - arrived_at) * 1000)
        if retry_after is not None:
            raise capacity_exhausted(execution_class, retry_after)
        # Queued ahead of later calls until its admission (inside its transaction) settles it.
        passed = _Pending(arrived_at, execution_class)
        self.pending.append(passed)
        self.inflight[execution_class] = self.inflight.get(execution_class, 0) + 1
        _ARRIVAL.set((self, passed))


# The current call (set by check_invoke, read once by admit): the same task runs
# both, so no call site has to carry it through the admission transaction.
_Arrival = tuple[CapacityEstimator, _Pending]
_ARRIVAL: contextvars.ContextVar[_Arrival | None] = contextvars.ContextVar(
    "capacity_arrival", default=None
)

# One estimator per process: it describes this process's executor and its view of the queue.
ESTIMATOR = CapacityEstimator()


def invoke_key(host_id: str, stable_tool_ref: str, binding_digest: str) -> tuple[str, str, str]:
    """The key of a Tool revision's budget in the pre-transaction check."""
    return (host_id, stable_tool_ref, binding_digest)


def check_invoke(
    host_id: str, stable_tool_ref: str, binding_digest: str | None, arrived_at: float
) -> None:
    """workflow_invoke's shed before any database round trip (raises the typed refusal)."""
    ESTIMATOR.check_invoke(host_id, stable_tool_ref, binding_digest, arrived_at)


def admit(
    execution_class: ExecutionClass,
    budget_ms: float | None = None,
    key: tuple[str, str, str] | None = None,
) -> None:
    """Deadline-aware admission of one new run (no database access); counts it as queued."""
    ESTIMATOR.admit(execution_class, budget_ms, key)


def record_claim(seconds: float) -> None:
    """The executor's claim round trip."""
    ESTIMATOR.record_claim(seconds)
    metrics.observe_claim(seconds)


def record_sojourn(execution_class: str, sojourn_ms: float) -> None:
    """A queued task's wait from enqueue to its claim by this process's executor."""
    ESTIMATOR.record_sojourn(execution_class, sojourn_ms)


def record_service(execution_class: str, seconds: float) -> None:
    """One task's time in an executor slot (claim to completion): the task-time metric only."""
    metrics.observe_service(execution_class, seconds)


def record_job(execution_class: str, seconds: float) -> None:
    """One executor job (a claimed run's chained tasks) from claim to its end."""
    ESTIMATOR.record_service(execution_class, seconds)


def admission_statements_per_tool() -> int:
    """Admission statements one Tool may have in flight at once in this process."""
    return ESTIMATOR.settings.admission_statements_per_tool


def completion_statements() -> int:
    """One-statement task completions this process may have in flight at once."""
    return ESTIMATOR.settings.completion_statements


def reset(settings: CapacitySettings | None = None) -> CapacityEstimator:
    """Forget all measurements (tests; a process re-configuring itself)."""
    global ESTIMATOR
    ESTIMATOR = CapacityEstimator(settings or CapacitySettings())
    return ESTIMATOR
