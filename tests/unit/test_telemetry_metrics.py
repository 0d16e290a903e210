"""Metric helpers: cached labelled children and unchanged slot reports report what they did."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.telemetry import metrics


@dataclass
class Slots:
    interactive_slots: int = 4
    standard_slots: int = 2
    batch_slots: int = 1


def _free(name: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(
        "workflow_executor_slots_available", {"execution_class": name}
    )


def test_slot_reports_follow_every_change_including_back_to_an_earlier_value() -> None:
    settings = Slots()
    metrics.record_slots(settings, [])
    assert (_free("interactive"), _free("standard"), _free("batch")) == (4, 2, 1)
    metrics.record_slots(settings, ["interactive", "interactive", "batch", "unknown"])
    assert (_free("interactive"), _free("standard"), _free("batch")) == (2, 2, 0)
    metrics.record_slots(settings, ["interactive", "interactive", "batch"])
    assert (_free("interactive"), _free("batch")) == (2, 0)
    metrics.record_slots(Slots(interactive_slots=1), ["interactive", "interactive"])
    assert _free("interactive") == 0
    metrics.record_slots(settings, [])
    assert (_free("interactive"), _free("standard"), _free("batch")) == (4, 2, 1)


def test_a_cached_child_is_the_registrys_own_series() -> None:
    child = metrics.labelled(metrics.ADMISSION_SECONDS, "unit-test")
    assert child is metrics.ADMISSION_SECONDS.labels("unit-test")
    assert metrics.labelled(metrics.ADMISSION_SECONDS, "unit-test") is child
    before = metrics.REGISTRY.get_sample_value(
        "workflow_admission_seconds_count", {"operation": "unit-test"}
    )
    child.observe(0.001)
    after = metrics.REGISTRY.get_sample_value(
        "workflow_admission_seconds_count", {"operation": "unit-test"}
    )
    assert after == (before or 0) + 1
