"""docs/OPERATIONS.md "Admission": with no worker running, an invoke is admitted, then times out."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.admission import CapacitySettings
from runtime.admission.controller import CapacityEstimator
from runtime.admission.prediction import ClassLoad
from runtime.errors import WorkflowError

DOC = Path(__file__).parents[2] / "docs" / "OPERATIONS.md"


def _paragraphs() -> str:
    return " ".join(DOC.read_text("utf-8").split())


def test_an_empty_queue_with_no_executor_slots_is_admitted() -> None:
    estimator = CapacityEstimator()
    estimator.configure(CapacitySettings())  # serve --no-workers: no slots of its own
    estimator.record_sample({"interactive": ClassLoad()})
    estimator.admit("interactive", budget_ms=20000)  # does not raise: nobody knows no worker runs


def test_a_queue_that_aged_past_the_budget_is_refused() -> None:
    estimator = CapacityEstimator()
    estimator.configure(CapacitySettings())
    # Aged 5 s: a call with 20 s to go still fits (no fixed queue-wait objective by default).
    estimator.record_sample({"interactive": ClassLoad(ready=1, oldest_ready_ms=5000.0)})
    estimator.admit("interactive", budget_ms=20000)
    estimator.record_sample({"interactive": ClassLoad(ready=1, oldest_ready_ms=20000.0)})
    with pytest.raises(WorkflowError) as refused:
        estimator.admit("interactive", budget_ms=20000)
    assert refused.value.code == "WORKFLOW_CAPACITY_EXHAUSTED"


def test_the_doc_says_what_an_invoke_gets_without_a_worker() -> None:
    text = _paragraphs()
    assert (
        "with `serve --no-workers` and no `worker` running, an invoke on an empty queue is admitted"
        in text
    )
    assert "the call answers `WORKFLOW_TIMEOUT` (retryable" in text
    assert "stopping `make run` stops the database under the running worker" in text
    assert "the same external `DATABASE_URL`" in text
