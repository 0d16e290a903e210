"""The shedding controller as pure logic: measured sojourn, service and drain on a fake clock."""

from __future__ import annotations

import contextlib
import time

import pytest

from runtime.admission.controller import CapacityEstimator, invoke_key
from runtime.admission.prediction import ClassController, ClassLoad
from runtime.admission.settings import CapacitySettings
from runtime.errors import WorkflowError

pytestmark = pytest.mark.requirement("001:Capacity And Availability")

EXACT = CapacitySettings(safety_factor=1.0, loop_lag_turns=0)
KEY = invoke_key("host-1", "tool-1", "digest-1")


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        """Let time pass."""
        self.t += seconds


def _estimator(settings: CapacitySettings = EXACT) -> tuple[CapacityEstimator, Clock]:
    clock = Clock()
    estimator = CapacityEstimator(settings, slots={"interactive": 4, "batch": 2}, clock=clock)
    return estimator, clock


def _refusal(estimator: CapacityEstimator, budget_ms: float, cls: str = "interactive") -> int:
    with pytest.raises(WorkflowError) as refused:
        estimator.admit(cls, budget_ms=budget_ms)  # type: ignore[arg-type]
    assert refused.value.code == "WORKFLOW_CAPACITY_EXHAUSTED"
    assert refused.value.retry_after_ms is not None
    return refused.value.retry_after_ms


def _sojourns(estimator: CapacityEstimator, clock: Clock, ms: float, seconds: float) -> None:
    """Claims every 10 ms for `seconds`, each after a wait of `ms`."""
    for _ in range(round(seconds / 0.01)):
        clock.advance(0.01)
        estimator.record_sojourn("interactive", ms)


def test_a_sojourn_below_the_deadline_is_admitted() -> None:
    estimator, clock = _estimator()
    estimator.record_sample({"interactive": ClassLoad(ready=2)})
    _sojourns(estimator, clock, 30, 0.3)
    assert estimator.controller("interactive").standing_ms(clock()) == pytest.approx(30)
    estimator.admit("interactive", budget_ms=1000)


def test_a_sustained_sojourn_beyond_the_deadline_is_shed() -> None:
    # The sampled depth is small, but every task claimed over the interval waited 2 s: the
    # queue drains far slower than the model says, and a new call would wait as long.
    estimator, clock = _estimator()
    _sojourns(estimator, clock, 2000, 0.3)
    estimator.record_sample({"interactive": ClassLoad(ready=2)})
    _refusal(estimator, budget_ms=1000)
    estimator.admit("interactive", budget_ms=5000)


def test_a_burst_that_drains_within_the_interval_is_not_a_standing_queue() -> None:
    estimator, clock = _estimator()
    estimator.record_sample({"interactive": ClassLoad()})
    estimator.record_sojourn("interactive", 3000)  # one task of a burst waited long
    clock.advance(0.02)
    estimator.record_sojourn("interactive", 5)  # the next one barely waited: it has drained
    assert estimator.controller("interactive").standing_ms(clock()) == pytest.approx(5)
    estimator.admit("interactive", budget_ms=1000)


def test_shedding_stops_once_the_sojourn_falls_back() -> None:
    estimator, clock = _estimator()
    _sojourns(estimator, clock, 2000, 0.3)
    estimator.record_sample({"interactive": ClassLoad()})
    _refusal(estimator, budget_ms=1000)
    _sojourns(estimator, clock, 10, 0.15)  # a full interval of short waits
    estimator.record_sample({"interactive": ClassLoad()})
    estimator.admit("interactive", budget_ms=1000)
    # And with nothing claimed for an interval, no stale sojourn lingers.
    _sojourns(estimator, clock, 2000, 0.3)
    clock.advance(0.2)
    estimator.record_sample({"interactive": ClassLoad()})
    estimator.admit("interactive", budget_ms=1000)


def test_retry_after_is_the_time_the_measured_drain_needs_to_fit_the_budget() -> None:
    # One slot of 1 s service models 1 run/s, but 100 runs/s were measured finishing: 300
    # ready drain in 3 s, then one service time. A 2 s budget fits once 200 have drained.
    estimator, clock = _estimator()
    estimator.slots = {"interactive": 1}
    for _ in range(100):
        clock.advance(0.01)
        estimator.record_service("interactive", 1.0)
    assert estimator.controller("interactive").drain_per_s(clock()) == pytest.approx(100)
    estimator.record_sample({"interactive": ClassLoad(ready=300, running=1)})
    assert _refusal(estimator, budget_ms=2000) == 2000
    estimator.admit("interactive", budget_ms=4000)


def test_the_drain_window_forgets_old_completions() -> None:
    controller = ClassController(interval_s=0.1, window_s=1.0)
    for n in range(50):
        controller.record_completion(10.0 + n * 0.01, 0.02)
    assert controller.drain_per_s(10.5) == pytest.approx(50)
    assert controller.drain_per_s(11.2) == pytest.approx(20)  # 0.2..0.49 s still in window
    assert controller.drain_per_s(13.0) == 0


def test_an_idle_class_low_completion_rate_is_not_mistaken_for_low_capacity() -> None:
    # 1 completion/s measured (little demand) but 4 slots of 20 ms: a burst of 40 drains in
    # 200 ms, not 40 s.
    estimator, _ = _estimator()
    estimator.record_service("interactive", 0.02)
    estimator.record_sample({"interactive": ClassLoad(ready=40)})
    predicted = estimator.predict("interactive")
    assert predicted is not None and predicted.queue_wait_ms == pytest.approx(200)


def test_a_queue_wait_over_a_second_that_fits_the_deadline_is_admitted_by_default() -> None:
    assert CapacitySettings().interactive_queue_wait_ms is None
    estimator, _ = _estimator(CapacitySettings(loop_lag_turns=0))
    estimator.record_service("interactive", 0.1)
    estimator.record_sample({"interactive": ClassLoad(ready=100, running=4)})  # 2.5 s of queue
    estimator.admit("interactive", budget_ms=20_000)
    _refusal(estimator, budget_ms=3000)  # 2.6 s x 1.5 does not fit 3 s


def test_a_batch_backlog_and_its_sojourns_never_count_against_interactive() -> None:
    estimator, clock = _estimator()
    for _ in range(30):
        clock.advance(0.01)
        estimator.controller("batch").record_sojourn(clock(), 60_000)
        estimator.record_service("batch", 5.0)
    estimator.record_sample({"batch": ClassLoad(ready=100_000, running=2)})
    estimator.admit("interactive", budget_ms=500)
    _refusal(estimator, budget_ms=10_000, cls="batch")


def test_the_pre_transaction_check_knows_only_tools_this_process_admitted() -> None:
    estimator, clock = _estimator()
    estimator.record_service("interactive", 0.1)
    estimator.record_sample({"interactive": ClassLoad(ready=4)})
    arrived = clock()
    # Unknown: judged later, by the admission, which remembers the budget.
    arrival = estimator.check_invoke("host-1", "tool-1", "digest-1", arrived)
    estimator.admit("interactive", 1000, KEY, arrival)
    estimator.record_sample({"interactive": ClassLoad(ready=400, running=4)})  # 10 s of queue
    with pytest.raises(WorkflowError) as refused:
        estimator.check_invoke("host-1", "tool-1", "digest-1", arrived)
    assert refused.value.retry_after_ms == 5000  # clamped
    # Another revision of the Tool is not judged by this one's budget.
    arrival = estimator.check_invoke("host-1", "tool-1", "digest-2", arrived)
    # Inside the transaction a call is judged again with what it has left, then counted.
    with pytest.raises(WorkflowError):
        estimator.admit("interactive", 1000, KEY, arrival)
    estimator.record_sample({"interactive": ClassLoad(ready=4)})
    estimator.admit("interactive", 1000, KEY)
    assert estimator.admitted_since_sample["interactive"] == 1


def test_the_remaining_deadline_counts_from_arrival_but_retry_gets_a_whole_budget() -> None:
    estimator, clock = _estimator()
    estimator.record_service("interactive", 0.1)
    estimator.admit("interactive", 1000, KEY)
    estimator.record_sample({"interactive": ClassLoad(ready=20, running=4)})  # 500 + 100 ms
    arrived = clock()
    estimator.check_invoke("host-1", "tool-1", "digest-1", arrived)
    clock.advance(0.5)  # the call waited 500 ms before admission looked at it
    with pytest.raises(WorkflowError) as refused:
        estimator.check_invoke("host-1", "tool-1", "digest-1", arrived)
    # A fresh call with the whole 1 s would fit now: retry at the shortest hint.
    assert refused.value.retry_after_ms == EXACT.retry_after_min_ms


def test_own_admissions_and_claims_since_the_sample_move_the_backlog() -> None:
    estimator, _ = _estimator()
    estimator.record_service("interactive", 0.1)
    estimator.record_sample({"interactive": ClassLoad(ready=8, running=4)})
    for _ in range(4):
        estimator.admit("interactive", budget_ms=10_000)
    estimator.record_sojourn("interactive", 1)
    estimator.record_sojourn("interactive", 1)
    predicted = estimator.predict("interactive")
    assert predicted is not None and predicted.queue_wait_ms == pytest.approx(10 * 100 / 4)


def test_the_check_is_cheap() -> None:
    # A refusal must cost a small fraction of an admission (milliseconds of CPU): the check
    # is a few dictionary lookups and arithmetic.
    estimator, _ = _estimator()
    estimator.record_service("interactive", 0.1)
    estimator.admit("interactive", 1000, KEY)
    estimator.record_sample({"interactive": ClassLoad(ready=400, running=4)})
    began = time.process_time()
    for _ in range(2000):
        with contextlib.suppress(WorkflowError):
            estimator.check_invoke("host-1", "tool-1", "digest-1", 0.0)
    per_call_us = (time.process_time() - began) / 2000 * 1e6
    assert per_call_us < 200, per_call_us


def test_a_standing_wait_to_be_admitted_counts_against_the_deadline() -> None:
    # The task queue is empty, but calls spend 950 ms from arrival to admission (waiting for
    # a connection): a Tool with 1 s no longer fits, one with 3 s does.
    estimator, clock = _estimator()
    roomy = invoke_key("host-1", "tool-3", "digest-3")
    estimator.record_service("interactive", 0.1)
    estimator.admit("interactive", 1000, KEY)
    estimator.admit("interactive", 3000, roomy)
    estimator.record_sample({"interactive": ClassLoad()})
    arrival = estimator.check_invoke("host-1", "tool-3", "digest-3", clock())
    clock.advance(0.95)
    estimator.admit("interactive", 3000, roomy, arrival)
    estimator.record_sample({"interactive": ClassLoad()})
    with pytest.raises(WorkflowError):
        estimator.check_invoke("host-1", "tool-1", "digest-1", clock())
    estimator.check_invoke("host-1", "tool-3", "digest-3", clock())
    # Once nobody has been admitted for an interval, the wait no longer counts.
    clock.advance(0.2)
    estimator.record_sample({"interactive": ClassLoad()})
    estimator.check_invoke("host-1", "tool-1", "digest-1", clock())


def test_calls_past_the_check_and_not_yet_admitted_are_queued_ahead() -> None:
    # 4 slots of 100 ms: 40 calls waiting for a connection are 1 s of queue ahead of the next.
    estimator, clock = _estimator()
    estimator.record_service("interactive", 0.1)
    estimator.admit("interactive", 1000, KEY)
    estimator.record_sample({"interactive": ClassLoad()})
    passed = 0
    with pytest.raises(WorkflowError):
        for _ in range(100):
            estimator.check_invoke("host-1", "tool-1", "digest-1", clock())
            passed += 1
    assert passed == 37  # the 37th sees 36 ahead: 900 + 100 ms
    # Calls that never reach admission (a re-attach, a replay) soon stop counting.
    clock.advance(0.06)
    estimator.record_sample({"interactive": ClassLoad()})
    estimator.check_invoke("host-1", "tool-1", "digest-1", clock())
    assert estimator.inflight["interactive"] == 1


def test_a_tool_quicker_than_the_class_average_service_is_not_locked_out() -> None:
    # One slow run (3 s, a gated backend) must not refuse a 300 ms Tool for capacity forever:
    # with an idle queue no capacity would make it fit, so capacity is not why it would fail.
    estimator, _ = _estimator()
    estimator.record_service("interactive", 3.0)
    estimator.record_sample({"interactive": ClassLoad()})
    estimator.admit("interactive", budget_ms=300)
    estimator.record_sample({"interactive": ClassLoad()})
    estimator.admit("interactive", budget_ms=3500)
    # A Tool the service time alone fits is still refused when the queue makes it miss.
    estimator.record_sample({"interactive": ClassLoad(ready=40, running=4)})  # 30 s of queue
    _refusal(estimator, budget_ms=5000)
