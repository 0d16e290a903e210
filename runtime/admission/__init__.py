"""Admission: whether a workflow_invoke or workflow_start may start a run now, and starting it.

The front door and the capacity controller (deadline-aware load shedding, its queue sampler),
invoke and start admission (revision lookup, token cover, sealing, the admission statements and
their batches). The process's state is one Admission object (runtime.admission.state), built by
the composition; the queue (runtime.scheduler) reports to it through its probe interface.
"""

from __future__ import annotations

from runtime.admission.invoke import Admitted, invoke_tool
from runtime.admission.pushed import admit_pushed_call
from runtime.admission.sampler import CapacitySampler
from runtime.admission.settings import CapacitySettings
from runtime.admission.start import (
    note_admitted,
    start_stage_in,
    start_workflow,
)
from runtime.admission.state import Admission

__all__ = [
    "Admission",
    "Admitted",
    "CapacitySampler",
    "CapacitySettings",
    "admit_pushed_call",
    "invoke_tool",
    "note_admitted",
    "start_stage_in",
    "start_workflow",
]
