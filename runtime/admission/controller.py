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
- load: a background sampler (runtime.admission.sampler) reads the ready and running
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

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from runtime.admission.prediction import (
    MIN_COMPLETIONS,
    PENDING_MIN_S,
    ClassController,
    ClassLoad,
    Estimate,
    Ewma,
    SlidingMin,
    capacity_exhausted,
    estimate,
    refusal_ms,
    retry_after_ms,
)
from runtime.admission.settings import CapacitySettings
from runtime.scheduler.models import EXECUTION_CLASSES, ExecutionClass


class Arrival:
    """One workflow_invoke past the pre-transaction check, carried to its admission: when it
    arrived, its class (None: an unknown Tool, not counted as queued), whether it was admitted
    (settled) and whether its admission has measured it yet (a stale revision's retry does not
    measure it twice)."""

    __slots__ = ("arrived_at", "done", "execution_class", "measured")

    def __init__(self, arrived_at: float, execution_class: str | None) -> None:
        self.arrived_at = arrived_at
        self.execution_class = execution_class
        self.done = execution_class is None
        self.measured = False


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
    pending: deque[Arrival] = field(default_factory=deque)
    inflight: dict[str, int] = field(default_factory=dict)
    claimed_since_sample: dict[str, int] = field(default_factory=dict)
    classes: dict[str, ClassController] = field(default_factory=dict)
    # (host, Tool, binding digest) -> (class, budget ms) of the revisions this process admitted.
    budgets: dict[tuple[str, str, str], tuple[ExecutionClass, float]] = field(default_factory=dict)
    # The longest of those budgets (ms), for the front door.
    longest_budget: float | None = None
    # The monotonic clock; tests inject a deterministic one.
    clock: Callable[[], float] = time.monotonic
    # Set by the sampler while it waits out an idle interval: the next call here wakes it.
    on_activity: Callable[[], None] | None = None

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
        arrival: Arrival | None = None,
        *,
        count: bool = True,
    ) -> None:
        """Refuse (WORKFLOW_CAPACITY_EXHAUSTED, retryAfterMs) a run that cannot finish in time.

        With key (an invoke's host, Tool and binding digest) the budget is remembered for the
        next call's pre-transaction check. A call that passed that check (arrival, what
        check_invoke returned) is judged again here with what it has left: one that waited out
        its deadline for a connection is refused (rolled back) rather than queued to time out.
        count: count the run as admitted here now; False when only a new run is counted, once
        known (count_admitted: workflow_start judges before its statement knows).
        """
        waited_ms = 0.0
        if arrival is not None and not arrival.measured:
            arrival.measured = True
            now = self.now()
            waited_ms = max(0.0, now - arrival.arrived_at) * 1000
            self.admission.record(now, waited_ms)
            self._settle(arrival)
        # Inside admission the call has already waited to be admitted: that is spent.
        retry_after = self.decide(execution_class, budget_ms, waited_ms, arriving=False)
        if retry_after is not None:
            raise capacity_exhausted(execution_class, retry_after)
        known = key is None or key in self.budgets
        if not known and budget_ms is not None and execution_class in EXECUTION_CLASSES:
            self._remember(key, execution_class, budget_ms)  # type: ignore[arg-type]
        if count:
            self.count_admitted(execution_class)

    def count_admitted(self, execution_class: str) -> None:
        """A run of the class admitted here since the last sample (it queues ahead of others)."""
        if self.on_activity is not None:
            self.on_activity()
        counts = self.admitted_since_sample
        counts[execution_class] = counts.get(execution_class, 0) + 1

    def _settle(self, pending: Arrival) -> None:
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
    ) -> Arrival | None:
        """The pre-transaction shed of workflow_invoke: O(1), no database, no lock.

        Raises the typed refusal; otherwise returns the call's Arrival for its admission
        (admit), or None when nothing is measured (shedding is off).
        """
        if self.on_activity is not None:
            self.on_activity()
        if not self.settings.enabled:
            return None
        now = self.now()
        self._expire_pending(now)
        known = self.budgets.get((host_id, stable_tool_ref, binding_digest or ""))
        if known is None:
            # An unknown Tool (or revision) is judged inside admission, where its budget is read.
            execution_class: ExecutionClass = "interactive"
            budget_ms: float | None = None
            if self.settings.interactive_queue_wait_ms is None:
                # Its admission still measures arrival to admission.
                return Arrival(arrived_at, None)
        else:
            execution_class, budget_ms = known
        retry_after = self.decide(execution_class, budget_ms, (now - arrived_at) * 1000)
        if retry_after is not None:
            raise capacity_exhausted(execution_class, retry_after)
        # Queued ahead of later calls until its admission (inside its transaction) settles it.
        passed = Arrival(arrived_at, execution_class)
        self.pending.append(passed)
        self.inflight[execution_class] = self.inflight.get(execution_class, 0) + 1
        return passed


def invoke_key(host_id: str, stable_tool_ref: str, binding_digest: str) -> tuple[str, str, str]:
    """The key of a Tool revision's budget in the pre-transaction check."""
    return (host_id, stable_tool_ref, binding_digest)
