"""This process's admission: one object, built by the composition and handed to whoever needs it.

It holds what admission measures and decides with: the capacity controller (its measurements
and the latest queue sample), the front door (its places and its queue), and the admission
batchers of each database. The composition builds one per process (`serve` before the app, so
the HTTP server's front door and the handlers share it), configures it from the `capacity`
section, hands it to the executor of the same process as the queue's probe, and to the sampler.
Tests build one per app, so no measurement of one test reaches the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from runtime.admission.batches import AdmissionBatcher, admission_batcher
from runtime.admission.controller import CapacityEstimator
from runtime.admission.door import FrontDoor
from runtime.admission.settings import CapacitySettings
from runtime.scheduler.models import ClaimedTask
from runtime.store import Database, PerDatabase


class Admission:
    """The capacity controller, the front door and the admission batchers of one process.

    It is the queue's probe (runtime.scheduler.probe.QueueProbe) of the executor of its process.
    """

    def __init__(
        self,
        settings: CapacitySettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        settings = settings or CapacitySettings()
        self.estimator = CapacityEstimator(settings, clock=clock)
        self.door = FrontDoor(self.estimator, clock=clock)
        self.door.configure(settings)
        self._batchers: PerDatabase[AdmissionBatcher] = PerDatabase(
            lambda db: admission_batcher(db, self._statements_per_tool)
        )

    @property
    def settings(self) -> CapacitySettings:
        """The `capacity` section in force."""
        return self.estimator.settings

    def configure(self, settings: CapacitySettings, slots: dict[str, int] | None = None) -> None:
        """Apply the `capacity` section and (when this process executes tasks) its slots."""
        self.estimator.configure(settings, slots)
        self.door.configure(settings)

    def batcher(self, db: Database) -> AdmissionBatcher:
        """The admission batcher of db (batches never mix databases)."""
        return self._batchers(db)

    def _statements_per_tool(self) -> int:
        return self.estimator.settings.admission_statements_per_tool

    # The queue's probe: what the executor of this process measures.

    def claimed(self, seconds: float) -> None:
        """One claim round trip of the executor."""
        self.estimator.record_claim(seconds)

    def started(self, task: ClaimedTask) -> None:
        """A task started here: its call's place at the door frees; its queue wait counts."""
        self.door.started(task.process_id)
        self.estimator.record_sojourn(task.execution_class, task.sojourn_ms)

    def job_done(self, execution_class: str, seconds: float) -> None:
        """A job ended: its claim-to-end time is the class's service time and drain."""
        self.estimator.record_service(execution_class, seconds)
