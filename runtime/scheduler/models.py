"""Values the scheduler hands around: runs, tasks, leases, outcomes, budgets, settings."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

import msgspec

ExecutionClass = Literal["interactive", "standard", "batch"]
CancellationPolicy = Literal["before-effects-only", "cooperative", "disabled"]
EffectState = Literal["none", "possible", "confirmed"]
# The run states, defined here once (invocation and execution import them).
RunState = Literal["ACCEPTED", "RUNNING", "WAITING", "COMPLETED", "FAILED", "CANCELLED"]
LIVE_STATES: frozenset[RunState] = frozenset({"ACCEPTED", "RUNNING", "WAITING"})
TERMINAL_STATES: frozenset[RunState] = frozenset({"COMPLETED", "FAILED", "CANCELLED"})
# What cancelling a run did (workflow_cancel's result, plus the two refusals).
CancelOutcome = Literal[
    "cancelled", "cancellationRequested", "alreadyTerminal", "disabled", "effect"
]


class RunSnapshot(msgspec.Struct, frozen=True):
    """What a waiter reads of a run: its state, result, stored error document, effect state."""

    state: RunState
    result: Any
    error: dict[str, Any] | None
    effect_state: EffectState


EXECUTION_CLASSES: tuple[ExecutionClass, ...] = ("interactive", "standard", "batch")
CANCELLATION_POLICIES: tuple[CancellationPolicy, ...] = (
    "before-effects-only",
    "cooperative",
    "disabled",
)


@dataclass(frozen=True)
class BudgetAmounts:
    """Counts of each budget dimension: ceilings, reservations or actual usage."""

    attempts: int = 0
    nested_calls: int = 0
    request_bytes: int = 0
    intermediate_bytes: int = 0
    result_bytes: int = 0
    cost_units: int = 0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"budget {item.name} must be a non-negative integer")

    def as_params(self) -> dict[str, int]:
        """The amounts as query parameters."""
        return {item.name: getattr(self, item.name) for item in fields(self)}


@dataclass(frozen=True)
class NewTask:
    """A task to enqueue; step_no None means the step after the completing one."""

    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    step_no: int | None = None
    priority: int = 0
    idempotent: bool = False
    available_at: datetime | None = None


@dataclass(frozen=True)
class ClaimedTask:
    """A task as claimed by a worker."""

    host_id: str
    task_id: str
    process_id: str
    step_no: int
    kind: str
    payload: dict[str, Any]
    execution_class: ExecutionClass
    idempotent: bool
    attempts: int
    deadline_ts: datetime
    cancellation_policy: CancellationPolicy
    # How long the task waited in the queue before this claim (ms; 0: claimed at insert).
    sojourn_ms: float = 0.0


class StepRecord(msgspec.Struct, frozen=True):
    """A step ledger row: the effect state of one step of a run."""

    effect_state: EffectState
    output: Any
    fencing_token: int
    # The fingerprint of the call marked possible at this step (None: none was given).
    request_digest: str | None = None


@dataclass(frozen=True)
class ReconcileOutcome:
    """What a reconciliation did: settled now (False for a duplicate) and any overrun."""

    settled: bool
    overrun: bool


@dataclass
class LeaseState:
    """The fenced identity of one claim plus the worker-side signals about it."""

    host_id: str
    task_id: str
    process_id: str
    step_no: int
    lease_id: str
    fencing_token: int
    expires_ts: datetime
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    cancel_requested: asyncio.Event = field(default_factory=asyncio.Event)
    # Set once task code marks an effect possible: from then on the worker never cancels it.
    effect_dispatched: bool = False
    # Set while the worker writes the task's end under this lease: a renewal that misses the
    # row then met that write (a real loss is found by the fenced write itself).
    ending: bool = False

    def fence(self) -> dict[str, Any]:
        """The parameters every fenced statement matches on."""
        return {
            "host_id": self.host_id,
            "task_id": self.task_id,
            "lease_id": self.lease_id,
            "fencing_token": self.fencing_token,
        }


@dataclass(frozen=True)
class TaskOutcome:
    """What a handler returns: the task's output, then next tasks or the run's result."""

    output: Any = None
    next_tasks: tuple[NewTask, ...] = ()
    finish: bool = False
    run_result: Any = None
    # Budget the task used, debited in the completing transaction (all counters or none: an
    # insufficient budget fails the task with WORKFLOW_BUDGET_EXHAUSTED and commits nothing).
    consume: BudgetAmounts | None = None

    @classmethod
    def then(
        cls, *next_tasks: NewTask, output: Any = None, consume: BudgetAmounts | None = None
    ) -> TaskOutcome:
        """Complete this task and enqueue the given next tasks."""
        return cls(output=output, next_tasks=next_tasks, consume=consume)

    @classmethod
    def finish_run(
        cls, result: Any, *, output: Any = None, consume: BudgetAmounts | None = None
    ) -> TaskOutcome:
        """Complete this task and the run with result."""
        return cls(output=output, finish=True, run_result=result, consume=consume)


@dataclass(frozen=True)
class Successor:
    """Who may take a completing task's successor straight away (skipping the queue)."""

    worker_id: str
    lease_ms: int
    overrun_ms: int = 30_000


@dataclass(frozen=True)
class Completion:
    """What committing an outcome did: whether ready work waits, and any successor claimed."""

    backlog: bool
    successor: tuple[ClaimedTask, LeaseState] | None = None


@dataclass(frozen=True)
class SchedulerSettings:
    """Executor capacity and timing; durations in milliseconds unless named _s."""

    interactive_slots: int = 4
    standard_slots: int = 2
    batch_slots: int = 2
    # How many interactive slots batch may borrow while no interactive work is ready; one
    # stays unlent so a new interactive task never waits for a borrowed slot to drain.
    borrow_slots: int | None = None
    tenant_limit: int = 16
    lease_ms: int = 1000
    renew_interval_ms: int = 250
    reap_interval_ms: int = 250
    sweep_interval_ms: int = 500
    poll_interval_ms: int = 250
    aging_s: float = 10.0
    reclaim_min_remaining_ms: int = 250
    reap_batch: int = 100
    stop_grace_s: float = 5.0
    # How long past its deadline a run whose cancellationPolicy is disabled may still be
    # claimed, leased and left running: the write overrun (execution.outbound.write_overrun_s).
    # At deadline + overrun such a run stops like any other, so none holds a slot for ever.
    overrun_ms: int = 30_000
    # One-statement task completions in flight at once per database; the ones that end
    # meanwhile go together in the next statement (`capacity.completion_statements`).
    completion_statements: int = 4

    @property
    def effective_borrow_slots(self) -> int:
        """Borrowable interactive slots (default: all but one)."""
        if self.borrow_slots is not None:
            return max(0, min(self.borrow_slots, self.interactive_slots))
        return max(0, self.interactive_slots - 1)
