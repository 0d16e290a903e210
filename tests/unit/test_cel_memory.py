"""CEL charges the bytes of the values it builds: size amplification stops early and bounded."""

from __future__ import annotations

import tracemalloc

import pytest

from runtime.engine.cel import CelLimits, ExpressionError, evaluate_value
from runtime.engine.step_meter import (
    MemoryBudgetExhausted,
    StepBudgetExhausted,
    StepMeter,
    metering,
)

AMPLIFY = "items.map(x, s + s + s + s)"
# 400 elements of four copies of a 50 KB string: 80 MB of strings if nothing stopped it.
HOSTILE = {"s": "x" * 50_000, "items": list(range(400))}


@pytest.mark.requirement("001:CEL Runtime Contract")
def test_a_comprehension_multiplying_a_large_input_stops_at_the_memory_ceiling() -> None:
    meter = StepMeter(limit=10_000_000)
    tracemalloc.start()
    try:
        with metering(meter), pytest.raises(MemoryBudgetExhausted):
            evaluate_value(AMPLIFY, HOSTILE)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert meter.bytes_built > meter.byte_limit
    # The whole map would hold 80 MB of strings; the ceiling (16 MiB built) keeps far below.
    assert peak < 40 * 1024 * 1024


@pytest.mark.requirement("001:CEL Runtime Contract")
def test_built_bytes_cost_steps_so_the_step_budget_also_bounds_allocation() -> None:
    meter = StepMeter(limit=2_000, byte_limit=1 << 40)
    with metering(meter), pytest.raises(StepBudgetExhausted):
        evaluate_value(AMPLIFY, HOSTILE)
    # Far fewer than 400 elements: each one costs ~440 steps for its 450 KB of concatenation.
    assert meter.steps <= 2_001 + 1_000


@pytest.mark.requirement("001:CEL Runtime Contract")
def test_without_a_task_meter_the_evaluation_byte_limit_is_a_cost_error() -> None:
    limits = CelLimits(max_steps=10_000_000, max_built_bytes=1_000_000)
    with pytest.raises(ExpressionError) as caught:
        evaluate_value(AMPLIFY, HOSTILE, limits)
    assert caught.value.reason == "cost"
    assert "1000000 bytes" in caught.value.message


@pytest.mark.requirement("001:CEL Runtime Contract")
def test_the_memory_verdict_is_the_same_on_every_run() -> None:
    used = []
    for _ in range(2):
        meter = StepMeter(limit=10_000_000, byte_limit=3_000_000)
        with metering(meter), pytest.raises(MemoryBudgetExhausted):
            evaluate_value(AMPLIFY, HOSTILE)
        used.append(meter.bytes_built)
    assert used[0] == used[1]


def test_references_to_an_existing_value_cost_no_bytes() -> None:
    meter = StepMeter(limit=100_000)
    with metering(meter):
        evaluate_value("[s, s, s].size()", HOSTILE)
    assert meter.bytes_built < 1_000
