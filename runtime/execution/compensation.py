"""Compensation, owned by the runtime (issue 42 item 1): undo a failed run's confirmed writes.

Design, durable at every step:

1. A write task that carries `compensate:` ledgers its mark (pointer, name, `when`, the context
   and workflow input as the task runs) with the write itself, in the statement that marks it
   possible (``runtime.engine.run.compensation_marks``, migration 0087). Nothing else is written on
   the run's path, and a run that never writes pays nothing at all.
2. When a run that wrote ends FAILED or CANCELLED (a failure, a cancel, its deadline: every
   path updates workflow_process.state), a trigger lists its compensable writes, most recently
   confirmed first (fork siblings included: each is a ledgered write), as one
   workflow_compensation row, and enqueues a compensation run: a scheduler run of its own
   whose tasks are claimed, leased, renewed, reaped and fenced like any workflow task. The
   ended run keeps its original error; status reads add the compensation record.
3. This handler runs one compensation step per scheduler task: task (index, attempt) runs
   step ``index``'s compensation body through the interpreter, with the write's recorded
   output as input, over a DurableEffects port whose writes are ledgered in the compensation
   run at a range of step numbers of that (index, attempt) alone. A worker killed mid-step is
   reclaimed into the same (index, attempt): confirmed writes replay from the ledger, a write
   that may have happened is not sent again (the step fails, reported, never guessed).
4. A failing step is tried again, as a new task with its own ledger range, while its retry
   (`compensate.retry`, else the compensation_retries setting) allows, unless the failure is a
   refusal a retry cannot change (``error_mapping.is_refusal``: a 4xx fault such as a denied
   policy, a missing secret or invalid input, or a tool error its registry flag calls not
   retryable; a denied policy raised here is final too): that step fails at once with its
   registry code and reason, for `runs compensate` after the cause is fixed. A step whose effect's
   outcome is unknown (``possible``) is compensated only with `compensate.when: possible`,
   otherwise skipped and reported. Nothing starts later than the compensation_allowance_s
   setting after the run ended (for a deadline end: the deadline, or the end of the write it
   left to finish, at most write_overrun_s later), so the undo is bounded too.
5. The record ends completed, or failed (logged, counted in
   workflow_compensations{outcome="failed"}, listed by `runs list --compensation failed`, and
   started again by `workflow-mcp runs compensate ID`); a compensation run that itself dies
   leaves the record failed too (a trigger of migration 0087).
6. A retry has no run credential: seed 000 deletes it when a run ends, and the compensation
   run's copy went with that run's end. No other identity may stand in for the initiating
   user (seed 001: nested calls default to the initiating user's narrowed delegation; a
   service identity needs publication-time approval evidence, which a host secret's call has
   and an operator's token has not). So `runs compensate` refuses up front, changing nothing,
   when a step it would run calls with the run's token (``credential_refusal``); steps whose
   calls use host secrets or no authentication are retried.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.engine import parse_definition
from runtime.engine.run import EffectFailure, LoopBoundEffects
from runtime.engine.run.compensation import (
    NothingToUndo,
    compensated_task,
    needs_run_credential,
    recorded_output,
    run_compensation,
)
from runtime.engine.run.error_mapping import fault_code, is_refusal
from runtime.engine.step_meter import StepBudgetExhausted, StepMeter
from runtime.errors import AuthenticationError, WorkflowError
from runtime.execution import compensation_store, store
from runtime.execution.credential import RunToken, open_credential, select_run_token
from runtime.execution.effects import CALL_SLOTS, DurableEffects, RunDeadlineExpired
from runtime.execution.settings import MAX_COMPENSATION_RETRIES
from runtime.execution.task_runner import DeadlineClock, WorkflowRuntime, _limits
from runtime.scheduler import faults
from runtime.scheduler.lease import TaskLease
from runtime.scheduler.models import ClaimedTask, NewTask, TaskOutcome
from runtime.store import Database
from runtime.telemetry import metrics

COMPENSATION_TASK_KIND = "compensation"
# workflow_compensation_ceiling() of migration 0087: a compensation run's deadline is the
# compensated run's (or its end, when later) plus this.
CEILING = timedelta(hours=1)
_ATTEMPT_SLOTS = MAX_COMPENSATION_RETRIES + 1
_UNKNOWN_OUTCOME = (
    "the write's outcome is unknown (effect possible) and its compensate does not say it is "
    "safe for an unknown outcome (compensate.when: possible): reported, not compensated"
)
_ALLOWANCE_SPENT = "the compensation allowance after the run's deadline ran out"

log = logging.getLogger("workflow.execution.compensation")


def ledger_base(index: int, attempt: int) -> int:
    """The step number the writes of step index's attempt are ledgered after."""
    return (index * _ATTEMPT_SLOTS + attempt + 1) * CALL_SLOTS


@dataclass(frozen=True)
class _Done:
    """How one attempt of a step ended: its error (None: compensated), its state otherwise,
    and whether (and after how long) it is tried again."""

    error: str | None
    state: str = "failed"
    retry: bool = False
    delay_ms: int = 0


@dataclass
class CompensationRunner:
    """The handler of compensation tasks, sharing the workflow runtime's caches and settings."""

    runtime: WorkflowRuntime

    async def handle(self, task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
        """Run the next compensation step of the run this compensation run undoes."""
        db = lease.database
        compensated = str(task.payload["compensates"])
        index = int(task.payload.get("index", 0))
        attempt = int(task.payload.get("attempt", 0))
        async with db.transaction(read_only=True) as conn:
            record = await compensation_store.select_compensation(conn, task.host_id, compensated)
        if record is None or record.compensation_process_id != task.process_id:
            # A retry started another compensation run: this one has nothing left to do.
            return TaskOutcome.finish_run({"superseded": True})
        steps = record.steps
        while index < len(steps) and steps[index]["state"] not in ("pending", "running"):
            index, attempt = index + 1, 0  # recorded before a crash: go on after it
        if index >= len(steps):
            return await self._finish(db, task, lease, compensated, steps)
        stop_at = (
            task.deadline_ts
            - CEILING
            + timedelta(seconds=self.runtime.settings.compensation_allowance_s)
        )
        step = dict(steps[index])
        done = await self._step(db, task, lease, compensated, step, index, attempt, stop_at)
        # Lets a test kill a worker after a step's writes were ledgered, before its record.
        await faults.point(f"compensation_step_ran_{index}")
        step["attempts"] = attempt + 1
        if done.error is None:
            step["state"] = "completed"
            step.pop("error", None)
        else:
            step["error"] = done.error
            step["state"] = "pending" if done.retry else done.state
        async with db.transaction() as conn:
            await compensation_store.record_step(
                conn, lease.state, compensated, index, step, "running"
            )
        await faults.point(f"after_compensation_step_{index}")
        if done.retry:
            available_at = datetime.now(UTC) + timedelta(milliseconds=done.delay_ms)
            return self._next(task, compensated, index, attempt + 1, available_at)
        return self._next(task, compensated, index + 1, 0, None)

    def _next(
        self,
        task: ClaimedTask,
        compensated: str,
        index: int,
        attempt: int,
        available_at: datetime | None,
    ) -> TaskOutcome:
        payload = {"compensates": compensated, "index": index, "attempt": attempt}
        next_task = NewTask(
            COMPENSATION_TASK_KIND, payload, step_no=task.step_no + 1, available_at=available_at
        )
        return TaskOutcome.then(next_task, output={"index": index, "attempt": attempt})

    async def _finish(
        self,
        db: Database,
        task: ClaimedTask,
        lease: TaskLease,
        compensated: str,
        steps: list[dict[str, Any]],
    ) -> TaskOutcome:
        """Record the compensation's end: failed when any step failed, else completed."""
        state = "failed" if any(step["state"] == "failed" for step in steps) else "completed"
        if steps:
            async with db.transaction() as conn:
                await compensation_store.record_step(
                    conn, lease.state, compensated, len(steps) - 1, steps[-1], state
                )
        metrics.record_compensation(state)
        if state == "failed":
            failed = [step.get("name") for step in steps if step["state"] == "failed"]
            log.warning(
                "compensation of run %s failed (steps %s); `workflow-mcp runs compensate %s` "
                "tries it again",
                compensated,
                ", ".join(map(str, failed)),
                compensated,
            )
        return TaskOutcome.finish_run({"compensation": state})

    async def _step(
        self,
        db: Database,
        task: ClaimedTask,
        lease: TaskLease,
        compensated: str,
        step: dict[str, Any],
        index: int,
        attempt: int,
        stop_at: datetime,
    ) -> _Done:
        """One attempt of one compensation step."""
        if datetime.now(UTC) >= stop_at:
            return _Done(_ALLOWANCE_SPENT)
        async with db.transaction(read_only=True) as conn:
            ledgered = await compensation_store.select_compensated_step(
                conn, task.host_id, compensated, int(step["stepNo"])
            )
        run_task = replace(task, process_id=compensated, payload={})
        loaded = await self.runtime._load(db, run_task)
        mark = {} if ledgered is None else ledgered.compensation or {}
        target = compensated_task(loaded.definition, str(mark.get("task", "")))
        if ledgered is None or target is None or target.compensate is None:
            return _Done("the compensated write or its compensation is no longer known")
        if ledgered.effect_state != "confirmed":
            if target.compensate.when != "possible":
                return _Done(_UNKNOWN_OUTCOME, state="skipped")
            data = None
        else:
            try:
                data = recorded_output(target, ledgered.output)
            except NothingToUndo as nothing:
                return _Done(f"nothing to undo: {nothing}", state="skipped")
        # Lets a test kill a worker at an exact compensation step (after its claim).
        await faults.point(f"before_compensation_step_{index}")
        base = ledger_base(index, attempt)
        view = replace(task, step_no=base, deadline_ts=stop_at)
        async with db.transaction(read_only=True) as conn:
            prior = await store.select_call_steps(
                conn, task.host_id, task.process_id, base, base + CALL_SLOTS
            )
        ctx = self.runtime._call_context(db, view, lease, loaded, prior)
        ctx.token = self._token_source(db, task, compensated)
        effects = LoopBoundEffects(DurableEffects(ctx), asyncio.get_running_loop())
        limits = _limits(loaded, self.runtime.maximum_parallelism)

        async def interpret() -> Any:
            return await run_compensation(
                loaded.definition, target, data, dict(mark.get("context") or {}),
                mark.get("workflowInput"), effects, limits, DeadlineClock(stop_at),
            )  # fmt: skip

        try:
            ran = await self.runtime.engine.run(interpret, StepMeter(self._step_budget()))
        except RunDeadlineExpired:
            return _Done(_ALLOWANCE_SPENT)
        except StepBudgetExhausted as exhausted:
            return _Done(f"the compensation spent its budget of {exhausted.limit} steps")
        except WorkflowError as failed:
            # A write that may already have happened, a denied policy: never retried blindly.
            return _Done(failed.text())
        if ran.problem is None:
            return _Done(None)
        reason = f"{fault_code(ran.problem)}: {_problem_text(ran.problem)}"
        if is_refusal(ran.problem):
            # Tried again it would be refused again: failed at once, for an operator to fix
            # the cause and start it again (`runs compensate`).
            return _Done(reason)
        policy = target.compensate.retry
        retry = attempt < self._retries(policy)
        delay_ms = policy.delay_before_retry_ms(attempt + 1) if policy and retry else 0
        return _Done(reason, retry=retry, delay_ms=delay_ms)

    def _step_budget(self) -> int:
        return self.runtime.settings.task_step_budget

    def _retries(self, policy: Any) -> int:
        if policy is None or policy.attempt_count is None:
            return self.runtime.settings.compensation_retries
        return min(int(policy.attempt_count), MAX_COMPENSATION_RETRIES)

    def _token_source(self, db: Database, task: ClaimedTask, compensated: str) -> Any:
        """The compensated run's token, copied to the compensation run, sealed to the run."""
        runtime = self.runtime

        async def token() -> RunToken:
            async with db.transaction(read_only=True) as conn:
                stored = await store.select_credential(conn, task.host_id, task.process_id)
            try:
                if stored is None:
                    raise AuthenticationError("the compensated run has no stored credential")
                opened = open_credential(runtime.keyring, stored.sealed, task.host_id, compensated)
                selected = select_run_token(
                    opened,
                    stored.token_expires_ts,
                    margin_seconds=runtime.token_margin_seconds,
                    check=runtime.token_check,
                )
                return RunToken(selected, stored.exchanged)
            except AuthenticationError as exc:
                raise EffectFailure("authentication", exc.message, 401) from None

        return token


def _problem_text(problem: dict[str, Any]) -> str:
    """A compensation's fault in one line: title, detail and status, never raw internals."""
    parts = [str(problem.get(key)) for key in ("title", "detail") if problem.get(key)]
    status = problem.get("status")
    where = problem.get("instance")
    text = ": ".join(parts) or "the compensation failed"
    if status is not None:
        text += f" (status {status})"
    if where:
        text += f" at {where}"
    return text


async def credential_refusal(db: Database, host_id: str, process_id: str) -> WorkflowError | None:
    """Why a retry of the run's failed compensation cannot run (None: it can, or none failed).

    The steps a retry runs (failed, unfinished or never started) whose compensation calls with
    the run's user token are refused: that token was deleted when the run ended (step 6 of the
    design above). The error is typed: reason runCredentialGone and the steps by name.
    """
    async with db.transaction(read_only=True) as conn:
        record = await compensation_store.select_compensation(conn, host_id, process_id)
        if record is None or record.state != "failed":
            return None
        spec = await store.select_run_spec(conn, host_id, process_id)
        document = None if spec is None else spec.definition
        if spec is not None and document is None and spec.wf_def_id and spec.workflow_version:
            document = await store.select_definition_document(
                conn, host_id, spec.wf_def_id, spec.workflow_version
            )
    if document is None:
        return None  # the retry's steps report the missing definition themselves
    definition = parse_definition(document)
    names = []
    for step in record.steps:
        if step["state"] not in ("failed", "running", "pending"):
            continue
        task = compensated_task(definition, str(step.get("task", "")))
        if task is not None and needs_run_credential(task):
            names.append(str(step.get("name") or step.get("task")))
    if not names:
        return None
    return WorkflowError(
        "WORKFLOW_POLICY_DENIED",
        f"the compensation cannot be retried: step(s) {', '.join(names)} call with the run's "
        "user credential, which was deleted when the run ended, and no other identity may "
        "act for the user who started it; nothing was changed",
        details={"reason": "runCredentialGone", "steps": names},
    )
