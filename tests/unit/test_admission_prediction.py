"""Deadline-aware admission: the pure estimate, the refusal and its retryAfterMs."""

from __future__ import annotations

import pytest

from runtime.admission.controller import CapacityEstimator
from runtime.admission.prediction import ClassLoad, estimate, refusal_ms, retry_after_ms
from runtime.admission.settings import CapacitySettings
from runtime.errors import WorkflowError
from runtime.settings import Settings

NO_LIMIT = CapacitySettings(interactive_queue_wait_ms=None, safety_factor=1.0)


def test_queued_work_drains_over_the_busy_slots_of_the_cluster() -> None:
    # 40 queued tasks of 10 ms over 8 running slots: 50 ms of queue, then claim and service.
    predicted = estimate(ClassLoad(ready=40, running=8), 0, 4, service_ms=10, claim_ms=1)
    assert predicted.queue_wait_ms == pytest.approx(50)
    assert predicted.completion_ms == pytest.approx(61)


def test_this_process_slots_are_the_floor_and_its_own_admissions_count_as_queued() -> None:
    predicted = estimate(ClassLoad(ready=6, running=0), 2, 4, service_ms=10, claim_ms=0)
    assert predicted.queue_wait_ms == pytest.approx(8 * 10 / 4)
    lone = estimate(ClassLoad(ready=3, running=0), 0, 0, service_ms=10, claim_ms=0)
    assert lone.queue_wait_ms == pytest.approx(30)


def test_a_prediction_within_budget_and_queue_limit_fits() -> None:
    predicted = estimate(ClassLoad(ready=4), 0, 4, service_ms=10, claim_ms=0)
    assert refusal_ms(predicted, 100, 50, 1.0) is None
    assert refusal_ms(predicted, None, None, 1.0) is None


def test_the_excess_is_the_larger_overrun_scaled_by_the_safety_factor() -> None:
    predicted = estimate(ClassLoad(ready=40), 0, 4, service_ms=10, claim_ms=0)  # 100 + 10 ms
    assert refusal_ms(predicted, 100, None, 1.0) == pytest.approx(10)
    assert refusal_ms(predicted, 100, None, 2.0) == pytest.approx(120)
    assert refusal_ms(predicted, 1000, 40, 1.0) == pytest.approx(60)


def test_retry_after_is_the_unscaled_excess_clamped() -> None:
    assert retry_after_ms(300, 1.5, 100, 5000) == 200
    assert retry_after_ms(1, 1.0, 100, 5000) == 100
    assert retry_after_ms(10**9, 1.0, 100, 5000) == 5000


def _loaded(settings: CapacitySettings, ready: dict[str, int]) -> CapacityEstimator:
    estimator = CapacityEstimator(settings, slots={"interactive": 4, "batch": 2})
    for execution_class in ("interactive", "batch"):
        estimator.record_service(execution_class, 0.1)
    estimator.record_sample({name: ClassLoad(ready=count) for name, count in ready.items()})
    return estimator


def test_a_run_that_cannot_meet_its_budget_is_refused_with_retry_after() -> None:
    estimator = _loaded(NO_LIMIT, {"interactive": 40})  # 1000 ms queue + 100 ms service
    with pytest.raises(WorkflowError) as refused:
        estimator.admit("interactive", budget_ms=500)
    assert refused.value.code == "WORKFLOW_CAPACITY_EXHAUSTED"
    assert refused.value.retry_after_ms == 600
    estimator.admit("interactive", budget_ms=2000)


def test_a_batch_backlog_never_counts_against_interactive_admission() -> None:
    estimator = _loaded(CapacitySettings(), {"batch": 10_000})
    estimator.admit("interactive", budget_ms=200)
    with pytest.raises(WorkflowError):
        estimator.admit("batch", budget_ms=200)


def test_each_admission_counts_as_queued_until_the_next_sample() -> None:
    estimator = _loaded(NO_LIMIT, {"interactive": 0})
    admitted = 0
    with pytest.raises(WorkflowError):
        for _ in range(100):
            estimator.admit("interactive", budget_ms=1000)
            admitted += 1
    # The 37th sees 36 queued: 36 * 100 ms / 4 slots + 100 ms = 1000 ms, just fits.
    assert admitted == 37
    estimator.record_sample({"interactive": ClassLoad()})
    estimator.admit("interactive", budget_ms=1000)


def test_the_interactive_queue_wait_objective_refuses_whatever_the_budget() -> None:
    settings = CapacitySettings(interactive_queue_wait_ms=200, safety_factor=1.0)
    estimator = _loaded(settings, {"interactive": 12})  # 300 ms of queue
    with pytest.raises(WorkflowError) as refused:
        estimator.admit("interactive", budget_ms=20_000)
    assert refused.value.retry_after_ms == 100


def test_without_a_fresh_sample_only_this_process_measurements_count() -> None:
    estimator = CapacityEstimator(NO_LIMIT)
    estimator.admit("interactive", budget_ms=1)  # never sampled, nothing measured
    stale = _loaded(NO_LIMIT, {"interactive": 10_000})
    stale.sampled_at = (stale.sampled_at or 0) - 10
    stale.admit("interactive", budget_ms=300)  # the stale backlog is not counted: 100 ms fits
    stale.record_sojourn("interactive", 500)
    with pytest.raises(WorkflowError):
        stale.admit("interactive", budget_ms=300)  # the measured standing sojourn still is
    off = _loaded(CapacitySettings(enabled=False), {"interactive": 10_000})
    off.admit("interactive", budget_ms=1)


def test_settings_are_in_the_service_configuration_with_checked_values() -> None:
    assert Settings().capacity == CapacitySettings()
    with pytest.raises(ValueError):
        CapacitySettings(retry_after_min_ms=10, retry_after_max_ms=5)
    with pytest.raises(ValueError):
        CapacitySettings(sample_interval_ms=2000, stale_after_ms=1000)


def test_an_observed_queue_delay_longer_than_the_model_wins() -> None:
    slow = estimate(ClassLoad(ready=2, oldest_ready_ms=900), 0, 4, service_ms=10, claim_ms=0)
    assert slow.queue_wait_ms == pytest.approx(900)
    fast = estimate(ClassLoad(ready=80, oldest_ready_ms=5), 0, 4, service_ms=10, claim_ms=0)
    assert fast.queue_wait_ms == pytest.approx(200)


def test_a_lagging_event_loop_adds_its_delay_to_the_wait() -> None:
    predicted = estimate(ClassLoad(), 0, 4, service_ms=10, claim_ms=0, loop_delay_ms=300)
    assert predicted.queue_wait_ms == pytest.approx(300)
    settings = CapacitySettings(interactive_queue_wait_ms=200, safety_factor=1.0)
    estimator = _loaded(settings, {"interactive": 0})
    estimator.record_loop_lag(0.300)  # 300 ms late x 1 turn
    with pytest.raises(WorkflowError) as refused:
        estimator.admit("interactive")
    assert refused.value.retry_after_ms == 100
