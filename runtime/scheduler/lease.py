"""The handle task code gets: fenced effect and budget writes under its claim's lease."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runtime.scheduler import service
from runtime.scheduler.errors import LeaseLost
from runtime.scheduler.models import (
    BudgetAmounts,
    ClaimedTask,
    LeaseState,
    ReconcileOutcome,
    StepRecord,
    TaskOutcome,
)
from runtime.store import Database, retry_on_connection_error

# Tries of a fenced effect-ledger write whose connection dropped. Each is idempotent under one
# lease (a re-mark by the same fencing token, a confirm of a confirmed step, a second settlement
# of a reservation all change nothing more), so a write whose COMMIT's outcome is unknown is
# simply sent again: a write whose answer is in hand is not thrown away for a dropped
# connection, which would leave its step "possible" and end the run as an uncertain effect
# (issue 42 item 7). A later try waits at BEGIN for the pool's fresh connection.
LEDGER_WRITE_TRIES = 3


class TaskLease:
    """A fenced lease on one claimed task; every write raises LeaseLost once it is stale."""

    def __init__(
        self,
        db: Database,
        state: LeaseState,
        prior_step: StepRecord | None,
        *,
        idempotent: bool = False,
    ) -> None:
        self._db = db
        self.state = state
        # An idempotent task may take over a step an earlier attempt left "possible".
        self._idempotent = idempotent
        # The step ledger row left by an earlier attempt, if any: resume from it.
        self.prior_step = prior_step

    @property
    def database(self) -> Database:
        """The database this lease writes through (task code's own fenced writes use it)."""
        return self._db

    @property
    def lease_id(self) -> str:
        """The lease id of this claim."""
        return self.state.lease_id

    @property
    def fencing_token(self) -> int:
        """The fencing token of this claim (grows with every claim of any task)."""
        return self.state.fencing_token

    @property
    def expires_ts(self) -> datetime:
        """When the lease expires unless renewed."""
        return self.state.expires_ts

    @property
    def lost(self) -> bool:
        """Whether renewal found the lease gone (the next write will raise LeaseLost)."""
        return self.state.lost.is_set()

    async def check_cancelled(self) -> None:
        """Raise WORKFLOW_CANCELLED when the run asks for cooperative cancellation."""
        error = await service.cancel_signal(self._db, self.state)
        if error is not None:
            raise error

    def check(self) -> None:
        """Raise LeaseLost now if renewal already found the lease gone."""
        if self.lost:
            raise LeaseLost(self.state.task_id, "check")

    async def mark_effect_possible(
        self,
        step_no: int | None = None,
        *,
        request_digest: str | None = None,
        compensation: Any = None,
    ) -> None:
        """Record the step's effect as possible; call right before dispatching it."""
        step = self._step(step_no)
        await retry_on_connection_error(
            lambda: service.mark_effect_possible(
                self._db,
                self.state,
                step,
                takeover=self._idempotent,
                request_digest=request_digest,
                compensation=compensation,
            ),
            attempts=LEDGER_WRITE_TRIES,
        )

    async def confirm_effect(self, output: Any = None, step_no: int | None = None) -> bool:
        """Record the step's effect as confirmed with its output; call right after success."""
        step = self._step(step_no)
        return await retry_on_connection_error(
            lambda: service.confirm_effect(self._db, self.state, step, output),
            attempts=LEDGER_WRITE_TRIES,
        )

    async def reserve(self, **amounts: int) -> str:
        """Reserve budget (attempts=, nested_calls=, request_bytes=, ...); the reservation id."""
        return await service.reserve(self._db, self.state, BudgetAmounts(**amounts))

    async def reconcile(self, reservation_id: str, **actual: int) -> ReconcileOutcome:
        """Settle a reservation with actual usage; a duplicate settles nothing."""
        amounts = BudgetAmounts(**actual)
        return await retry_on_connection_error(
            lambda: service.reconcile(self._db, self.state, reservation_id, amounts),
            attempts=LEDGER_WRITE_TRIES,
        )

    def _step(self, step_no: int | None) -> int:
        return self.state.step_no if step_no is None else step_no


TaskHandler = Callable[[ClaimedTask, TaskLease], Awaitable[TaskOutcome]]


@dataclass(frozen=True)
class DispatchBudgeted:
    """A handler that reserves one attempt per outbound dispatch itself.

    "Task attempts" then count dispatch attempts (a call and each of its retries), so the
    executor charges nothing for the claim: an eight-task run without calls spends no attempt,
    and a reclaim after a crash is bounded by the run deadline, not by the attempt budget.
    """

    handler: TaskHandler

    async def __call__(self, task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
        """Run the wrapped handler."""
        return await self.handler(task, lease)
