"""The executor: asyncio workers that wake on NOTIFY, claim fairly and run task handlers.

One claim loop drains claims while capacity remains, then waits for a notification, the
fallback poll timer or stop. Per-class slots bound concurrency; batch may borrow idle
interactive slots, which interactive work gets back as borrowed tasks finish (a running
side effect is never preempted). Side tasks renew leases, reap expired ones and enforce
deadlines, under one monitor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runtime import telemetry
from runtime.cancellation import reraise_if_cancelled
from runtime.errors import WorkflowError
from runtime.scheduler import faults, maintenance, service, wakeup
from runtime.scheduler.errors import LeaseLost, task_failed, uncertain_effect_error
from runtime.scheduler.lease import DispatchBudgeted, TaskHandler, TaskLease
from runtime.scheduler.models import (
    BudgetAmounts,
    ClaimedTask,
    Completion,
    LeaseState,
    SchedulerSettings,
    StepRecord,
    Successor,
)
from runtime.scheduler.probe import NoProbe, QueueProbe
from runtime.scheduler.store import ledgers, queue
from runtime.scheduler.store.listener import TASK_READY_CHANNEL, NotificationListener
from runtime.store import Database, is_connection_error

log = logging.getLogger(__name__)

ClaimObserver = Callable[[ClaimedTask], None]
# Lease periods the reaper waits after the database was away (Executor._reap_once).
REAP_PAUSE_LEASES = 2
# The earliest a wake-up for a parked task may fire (see Executor._wake_in).
_MIN_DUE_DELAY_S = 0.002


class SlotReservation:
    """A slot of one executor kept free for a task inserted claimed by its worker."""

    def __init__(self, executor: Executor, execution_class: str) -> None:
        self._executor: Executor | None = executor
        self._class = execution_class
        self.worker_id = executor.worker_id
        self.lease_ms = executor.settings.lease_ms
        self.overrun_ms = executor.settings.overrun_ms

    def adopt(self, task: ClaimedTask, lease: LeaseState) -> None:
        """Run the task claimed for this slot (its lease is the executor's to renew)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor._adopt(task, lease)

    def release(self) -> None:
        """Give the slot back unused (the task, if any, was left ready); idempotent."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor._release(self._class)


@dataclass
class _Running:
    task: ClaimedTask
    lease: LeaseState
    borrowed: bool
    job: asyncio.Task[None] | None = None


async def _finish_or_cancel(tasks: list[asyncio.Task[Any]], grace_s: float, what: str) -> None:
    """Wait up to grace_s for tasks, then cancel the rest; a stop never waits for ever.

    An overrun is logged with where each task was waiting, so a stuck shutdown names its cause.
    """
    _, pending = await asyncio.wait(tasks, timeout=grace_s)
    for task in pending:
        log.warning("stopping: %s overran %.1fs; cancelling it at %s", what, grace_s, _where(task))
        task.cancel()
    if pending:
        _, stuck = await asyncio.wait(pending, timeout=grace_s)
        for task in stuck:
            log.error("stopping: %s ignored its cancellation at %s", what, _where(task))
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: the task's own handler already logged it


def _where(task: asyncio.Task[Any]) -> str:
    """Where a suspended task waits: its await chain, innermost frame last, as file:line name."""
    points: list[str] = []
    awaited: Any = task.get_coro()
    while awaited is not None and len(points) < 12:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is not None:
            name = frame.f_code.co_filename.rsplit("/", 1)[-1]
            points.append(f"{name}:{frame.f_lineno} {frame.f_code.co_name}")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return " > ".join(points) or "an unknown point"


class Executor:
    """Runs registered task handlers (one async callable per task kind) under fenced leases."""

    def __init__(
        self,
        db: Database,
        handlers: Mapping[str, TaskHandler],
        settings: SchedulerSettings | None = None,
        *,
        worker_id: str | None = None,
        conninfo: str | None = None,
        on_claim: ClaimObserver | None = None,
        probe: QueueProbe | None = None,
    ) -> None:
        self._db = db
        self._handlers = dict(handlers)
        self.settings = settings or SchedulerSettings()
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._conninfo = conninfo or _pool_conninfo(db)
        self._on_claim = on_claim
        # Admission in this process hears what this executor measures (runtime.scheduler.probe).
        self._probe: QueueProbe = probe or NoProbe()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._running: dict[str, _Running] = {}
        # Slots kept free for tasks an admission of this process may insert claimed for us.
        self._reserved: Counter[str] = Counter()
        self._listener: NotificationListener | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._monitor_task: asyncio.Task[None] | None = None
        self.claim_rounds = 0
        self._parked = False
        # When a side task last found the database away (monotonic; never: -inf).
        self._store_failed_at = float("-inf")
        # When this worker's leases were last renewed (or it held none to renew).
        self._renewed_at = time.monotonic()
        # The wake-up at the earliest parked task's available_at (a durable timer's due time):
        # its loop time and handle, and whether to look the next one up after a claim round.
        self._due_at: float | None = None
        self._due_handle: asyncio.TimerHandle | None = None
        self._look_up_due = True
        self._successor = Successor(
            self.worker_id, self.settings.lease_ms, self.settings.overrun_ms
        )

    @property
    def listener(self) -> NotificationListener | None:
        """The LISTEN connection wrapper (None before start)."""
        return self._listener

    async def start(self) -> None:
        """LISTEN first, then start claiming (so nothing inserted meanwhile is missed)."""
        service.use_completion_statements(self._db, self.settings.completion_statements)
        listener = NotificationListener(self._conninfo, [TASK_READY_CHANNEL], self._notified)
        try:
            await listener.start()
            await faults.point("after_listen")
        except BaseException:
            # A failed start leaves nothing open, so the caller may simply try again.
            with contextlib.suppress(Exception):
                await listener.close()
            raise
        self._listener = listener
        wakeup.register(self)
        self._loop_task = asyncio.create_task(self._claim_loop(), name="claim-loop")
        self._monitor_task = asyncio.create_task(self._monitor_side_tasks(), name="monitor")

    @property
    def alive(self) -> bool:
        """Started, claiming, and not stopped (by stop() or a crashed side task)."""
        return (
            self._loop_task is not None
            and not self._loop_task.done()
            and not self._stopping.is_set()
        )

    @property
    def idle(self) -> bool:
        """No task is running and the claim loop waits for a wake-up (tests and diagnostics)."""
        return not self._running and self._parked and not self._wake.is_set()

    async def stop(self) -> None:
        """Stop claiming, let running tasks finish within the grace, release the rest."""
        wakeup.unregister(self)
        self._stopping.set()
        self._wake.set()
        grace = self.settings.stop_grace_s
        if self._loop_task is not None:
            await _finish_or_cancel([self._loop_task], grace, "the claim loop")
        jobs = [r.job for r in self._running.values() if r.job is not None]
        if jobs:
            await _finish_or_cancel(jobs, grace, "a running task")
        if self._monitor_task is not None:
            self._monitor_task.cancel()
            await _finish_or_cancel([self._monitor_task], grace, "the lease monitor")
        if self._due_handle is not None:
            self._due_handle.cancel()
        if self._listener is not None:
            await self._listener.close()

    async def wait_stopped(self) -> None:
        """Block until stop is requested (by stop() or a crashed side task)."""
        await self._stopping.wait()

    async def __aenter__(self) -> Executor:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def wake(self) -> None:
        """Make the claim loop claim again now (a task was committed for it to take)."""
        self._wake.set()

    def wake_at(self, when: datetime) -> None:
        """Make the claim loop claim again at when (a parked task becomes available then)."""
        self._wake_in((when - datetime.now(UTC)).total_seconds())

    def _wake_in(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        # Never at once: a task due by this clock but not yet by the database's would be
        # looked up again and again until the clocks agree.
        at = loop.time() + max(seconds, _MIN_DUE_DELAY_S)
        if self._due_at is not None and self._due_at <= at:
            # An earlier wake-up is set; after it fires the next parked task is looked up.
            return
        if self._due_handle is not None:
            self._due_handle.cancel()
        self._due_at = at
        self._due_handle = loop.call_at(at, self._due)

    def _due(self) -> None:
        self._due_at = self._due_handle = None
        self._look_up_due = True
        self._wake.set()

    def _notified(self, payload: dict[str, object] | None) -> None:
        if payload is None or payload.get("type") == "task":
            self._wake.set()

    async def _claim_loop(self) -> None:
        while not self._stopping.is_set():
            # Clear before claiming: a NOTIFY arriving during the claim keeps us awake.
            self._wake.clear()
            request = self._claim_request()
            if request.limit > 0:
                claimed = await self._claim(request)
                for task, lease in claimed:
                    self._dispatch(task, lease)
                if not claimed:
                    # Woken for nothing available: what woke it may be a task parked ahead.
                    self._look_up_due = True
                # Fewer tasks than asked for: nothing else is ready now (a NOTIFY, a finished
                # task that saw a backlog, or the poll timer wakes the loop again).
                if len(claimed) >= request.limit and self._claim_request().limit > 0:
                    continue
            if self._look_up_due:
                await self._wake_for_next_due()
            await self._wait_for_wake()

    async def _wait_for_wake(self) -> None:
        self._parked = True
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.poll_interval_ms / 1000):
                    await self._wake.wait()
                    return
            # An idle poll: a task parked by another process may now be the earliest.
            self._look_up_due = True
        finally:
            self._parked = False

    async def _wake_for_next_due(self) -> None:
        """Wake at the earliest parked task's available_at (a timer's due time), if any."""
        self._look_up_due = False
        try:
            async with self._db.connection() as conn:
                seconds = await queue.next_available_in(conn)
        except Exception as exc:
            reraise_if_cancelled(exc)
            _log_incident("could not look up the next parked task; polling instead", exc)
            return
        if seconds is not None:
            self._wake_in(seconds)

    def free_slots(self, execution_class: str) -> int:
        """Slots this executor could fill with a task of the class right now."""
        request = self._claim_request()
        if execution_class == "interactive":
            return request.interactive_slots
        if execution_class == "standard":
            return request.standard_slots
        return request.batch_slots + request.borrow_slots

    def reserve(self, execution_class: str) -> SlotReservation | None:
        """Keep one free slot of the class for a task an admission may insert claimed for us.

        None when stopping or no slot of the class is free. The caller adopts the task it got
        (this executor runs it) or releases the slot; both exactly once.
        """
        if not self.alive or self._stopping.is_set():
            return None
        request = self._claim_request()
        free = {
            "interactive": request.interactive_slots,
            "standard": request.standard_slots,
            "batch": request.batch_slots,
        }.get(execution_class, 0)
        if free <= 0:
            return None
        self._reserved[execution_class] += 1
        return SlotReservation(self, execution_class)

    def _unreserve(self, execution_class: str) -> None:
        self._reserved[execution_class] -= 1
        if self._reserved[execution_class] <= 0:
            del self._reserved[execution_class]

    def _adopt(self, task: ClaimedTask, lease: LeaseState) -> None:
        self._unreserve(task.execution_class)
        if self._stopping.is_set():
            # Not started here: its lease runs out and the reaper hands it to another worker.
            return
        self._dispatch(task, lease)

    def _release(self, execution_class: str) -> None:
        self._unreserve(execution_class)
        # The slot is free again: ready work may be waiting for it.
        self._wake.set()

    def _claim_request(self) -> queue.ClaimRequest:
        s = self.settings
        reserved = self._reserved
        interactive = reserved["interactive"] + sum(
            r.task.execution_class == "interactive" for r in self._running.values()
        )
        standard = reserved["standard"] + sum(
            r.task.execution_class == "standard" for r in self._running.values()
        )
        borrowed = sum(r.borrowed for r in self._running.values())
        own_batch = reserved["batch"] + sum(
            r.task.execution_class == "batch" and not r.borrowed for r in self._running.values()
        )
        free_interactive = max(0, s.interactive_slots - interactive - borrowed)
        return queue.ClaimRequest(
            worker_id=self.worker_id,
            interactive_slots=free_interactive,
            standard_slots=max(0, s.standard_slots - standard),
            batch_slots=max(0, s.batch_slots - own_batch),
            borrow_slots=max(0, min(free_interactive, s.effective_borrow_slots - borrowed)),
        )

    async def _claim(self, request: queue.ClaimRequest) -> list[tuple[ClaimedTask, LeaseState]]:
        # A claim round is one claim query of the loop, numbered from 1 per executor: at start,
        # after each wake-up or poll timeout, and again at once after a claim that filled every
        # free slot (docs/OPERATIONS.md). Successors a completion claims are not rounds.
        self.claim_rounds += 1
        claim_round = self.claim_rounds
        began = time.perf_counter()
        try:
            # One statement is its own transaction: autocommit saves BEGIN and COMMIT trips.
            async with self._db.connection() as conn:
                claimed = await queue.claim_tasks(conn, request, self.settings)
            seconds = time.perf_counter() - began
            self._probe.claimed(seconds)
            telemetry.metrics.observe_claim(seconds)
            if claimed and log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "claim round %d claimed %d task(s)",
                    claim_round,
                    len(claimed),
                    extra={"claim_round": claim_round},
                )
            return claimed
        except Exception as exc:
            reraise_if_cancelled(exc)
            if is_connection_error(exc):
                self._store_failed_at = time.monotonic()
            _log_incident("claim failed; retrying after the poll interval", exc)
            return []

    def _dispatch(self, task: ClaimedTask, lease: LeaseState) -> None:
        own_batch = sum(
            r.task.execution_class == "batch" and not r.borrowed for r in self._running.values()
        )
        borrowed = task.execution_class == "batch" and own_batch >= self.settings.batch_slots
        running = _Running(task, lease, borrowed)
        self._running[task.task_id] = running
        # A run admitted through this process's front door started: its call's place frees.
        self._probe.started(task)
        running.job = asyncio.create_task(self._execute(task, lease), name=f"task-{task.task_id}")
        telemetry.metrics.record_slots(self.settings, self._running_classes())
        if self._on_claim is not None:
            self._on_claim(task)

    def _running_classes(self) -> list[str]:
        return [running.task.execution_class for running in self._running.values()]

    async def _execute(self, task: ClaimedTask, lease: LeaseState) -> None:
        # A completion may hand back the run's next task already claimed for this slot; the
        # job then runs it too, under its own lease.
        current: tuple[ClaimedTask, LeaseState] | None = (task, lease)
        began = time.perf_counter()
        try:
            while current is not None:
                current = await self._execute_one(*current)
        finally:
            # Claim to the end of the chain: the service time a queued run holds a slot for.
            self._probe.job_done(task.execution_class, time.perf_counter() - began)

    async def _execute_one(
        self, task: ClaimedTask, lease: LeaseState
    ) -> tuple[ClaimedTask, LeaseState] | None:
        # Claim again when the slot frees only if ready work may be waiting for it: a clean
        # completion says whether any is; other endings always look.
        completion = Completion(backlog=True)
        began = time.perf_counter()
        try:
            await faults.point("after_claim")
            completion = await telemetry.task(
                task.process_id, task.host_id, task.kind, task.execution_class,
                self._run_handler(task, lease),
            )  # fmt: skip
        except LeaseLost as lost:
            log.info("task %s: %s", task.task_id, lost)
        except Exception as exc:
            if not is_connection_error(exc):
                await self._fail_unexpected(task, lease, exc)
            else:
                await self._retry_later(task, lease, exc)
        except asyncio.CancelledError:
            if self._stopping.is_set() and not lease.lost.is_set():
                await self._release_quietly(lease)
            raise
        finally:
            running = self._running.pop(task.task_id, None)
            telemetry.metrics.observe_service(task.execution_class, time.perf_counter() - began)
            telemetry.metrics.record_slots(self.settings, self._running_classes())
            successor = completion.successor
            if successor is not None and running is not None:
                self._running[successor[0].task_id] = _Running(
                    successor[0], successor[1], running.borrowed, running.job
                )
                if self._on_claim is not None:
                    self._on_claim(successor[0])
            elif completion.backlog:
                self._wake.set()
        return completion.successor

    async def _run_handler(self, task: ClaimedTask, lease: LeaseState) -> Completion:
        handler = self._handlers.get(task.kind)
        if handler is None:
            raise task_failed(f"no handler for task kind {task.kind!r}")
        prior = await self._prior_step(task) if task.attempts > 1 else None
        if prior is not None and prior.effect_state == "possible" and not task.idempotent:
            # The earlier attempt may have written; repeating it blindly could duplicate it.
            raise uncertain_effect_error(task.step_no)
        if not isinstance(handler, DispatchBudgeted):
            # Every claim of a plain task, retries included, spends one attempt of the run's
            # shared budget; a DispatchBudgeted handler charges its own dispatches instead.
            await service.reserve(self._db, lease, BudgetAmounts(attempts=1))
        lease_handle = TaskLease(self._db, lease, prior, idempotent=task.idempotent)
        outcome = await handler(task, lease_handle)
        await faults.point("before_complete")
        # While stopping, nothing new is taken on: the successor goes to the queue instead.
        successor = None if self._stopping.is_set() else self._successor
        lease.ending = True
        return await service.complete(self._db, lease, outcome, successor)

    async def _prior_step(self, task: ClaimedTask) -> StepRecord | None:
        async with self._db.transaction(read_only=True) as conn:
            return await ledgers.get_step(conn, task.host_id, task.process_id, task.step_no)

    async def _fail_unexpected(self, task: ClaimedTask, lease: LeaseState, exc: Exception) -> None:
        if isinstance(exc, WorkflowError):
            await self._fail_quietly(lease, exc)
            return
        _log_incident(f"task {task.task_id} of kind {task.kind} raised", exc)
        await self._fail_quietly(lease, task_failed())

    async def _retry_later(self, task: ClaimedTask, lease: LeaseState, exc: Exception) -> None:
        """A task the database dropped mid-way is tried again, never ended with that error.

        The store being unreachable says nothing about the run: ended FAILED with a retryable
        WORKFLOW_INVOCATION_UNAVAILABLE, a run whose write had gone out would tell callers to
        retry a failure that hides a confirmed effect (issue 42 item 7). Given back (or, with
        the database still away, left to its lease's expiry and the reaper), the task runs
        again and replays from the step ledger: a confirmed write resumes from its recorded
        output, a possible one ends the run as after-effect, and the deadline bounds it all.
        """
        log.warning(
            "task %s: the database dropped during the task (%s); it will run again",
            task.task_id,
            type(exc).__name__,
        )
        if not lease.lost.is_set():
            await self._release_quietly(lease, expected=True)

    async def _fail_quietly(self, lease: LeaseState, error: WorkflowError) -> None:
        lease.ending = True
        try:
            await service.fail(self._db, lease, error)
        except LeaseLost:
            log.info("task %s: lease lost before recording its failure", lease.task_id)
        except Exception as exc:
            _log_incident(f"could not record the failure of task {lease.task_id}", exc)

    async def _release_quietly(self, lease: LeaseState, *, expected: bool = False) -> None:
        lease.ending = True
        try:
            await service.release(self._db, lease)
        except LeaseLost:
            log.info("task %s: lease lost before its release", lease.task_id)
        except Exception as exc:
            if expected and is_connection_error(exc):
                # The database is still away: the lease runs out and the reaper hands it back.
                log.warning("task %s: not released; its lease will expire", lease.task_id)
                return
            _log_incident(f"could not release task {lease.task_id}; its lease will expire", exc)

    async def _monitor_side_tasks(self) -> None:
        side_tasks = [
            asyncio.create_task(self._renew_leases(), name="renew-leases"),
            asyncio.create_task(self._reap_expired(), name="reap-expired"),
            asyncio.create_task(self._sweep_deadlines(), name="sweep-deadlines"),
        ]
        try:
            done, _ = await asyncio.wait(side_tasks, return_when=asyncio.FIRST_COMPLETED)
            for side_task in done:
                ended = side_task.exception()
                kind = type(ended).__name__ if ended is not None else "no exception"
                log.error("side task %s ended: %s", side_task.get_name(), kind)
            # Without its side tasks the worker cannot keep its leases honest: stop.
            self._stopping.set()
            self._wake.set()
        finally:
            for side_task in side_tasks:
                side_task.cancel()
            await asyncio.gather(*side_tasks, return_exceptions=True)

    async def _every(self, interval_ms: int, action: Callable[[], Awaitable[object]]) -> None:
        while True:
            # Jitter keeps several workers' sweeps from running in lockstep.
            await asyncio.sleep(interval_ms / 1000 * random.uniform(0.8, 1.2))
            try:
                await action()
            except Exception as exc:
                reraise_if_cancelled(exc)
                if is_connection_error(exc):
                    self._store_failed_at = time.monotonic()
                _log_incident("side task step failed; retrying next interval", exc)

    async def _reap_once(self) -> None:
        """Reclaim expired leases, unless the database was away a moment ago.

        While it was away no worker could renew: a lease that ran out then says nothing about
        its worker, which may hold a write's answer and be waiting to confirm it. Reclaimed at
        once, the write's step would be left possible and its run end as an uncertain effect
        (issue 42 item 7, a PostgreSQL restart). So the reaper waits REAP_PAUSE_LEASES lease
        periods after its last failed step: live workers renew first (renewal extends a lease
        still theirs, expired or not), and only dead workers' leases are reclaimed.
        """
        began = time.monotonic()
        await maintenance.reap_expired_once(
            self._db, self.settings, lambda: self._reaping_is_fair(began)
        )

    def _reaping_is_fair(self, began: float) -> bool:
        """Whether expired leases now say their workers are gone (asked after BEGIN).

        Not within REAP_PAUSE_LEASES lease periods of a step that failed or whose BEGIN waited
        more than a lease period (the database was away: a BEGIN that waited out a restart
        finds every lease run out, the live workers' too, whose renewals waited as well), nor
        while this worker's own renewal is more than a lease period late.
        """
        now = time.monotonic()
        lease_s = self.settings.lease_ms / 1000
        if now - began > lease_s:
            self._store_failed_at = now
        if now - self._store_failed_at < REAP_PAUSE_LEASES * lease_s:
            return False
        return now - self._renewed_at <= lease_s

    async def _renew_leases(self) -> None:
        await self._every(self.settings.renew_interval_ms, self._renew_once)

    async def _reap_expired(self) -> None:
        await self._every(self.settings.reap_interval_ms, self._reap_once)

    async def _sweep_deadlines(self) -> None:
        await self._every(
            self.settings.sweep_interval_ms,
            lambda: maintenance.sweep_deadlines_once(self._db, self.settings),
        )

    async def _renew_once(self) -> None:
        held = [r for r in self._running.values() if not r.lease.lost.is_set()]
        if not held:
            self._renewed_at = time.monotonic()
            return
        async with self._db.transaction() as conn:
            renewed = await queue.renew_leases(
                conn, [r.lease for r in held], self.settings.lease_ms, self.settings.overrun_ms
            )
        self._renewed_at = time.monotonic()
        for running in held:
            renewal = renewed.get(running.task.task_id)
            if renewal is not None:
                running.lease.expires_ts = renewal.expires_ts
                if renewal.cancel_requested:
                    running.lease.cancel_requested.set()
            elif (
                self._running.get(running.task.task_id) is running
                and not _done(running)
                and not running.lease.ending
            ):
                # Only a task still held: one that completed meanwhile (its job may already
                # run the successor) has simply left, and one whose end is being written may
                # have left before its job resumed; cancelling that job would strand the
                # successor its completion claimed.
                self._lease_lost(running)

    def _lease_lost(self, running: _Running) -> None:
        running.lease.lost.set()
        # Work that has not dispatched an effect is pointless now; a dispatched write finishes.
        if not running.lease.effect_dispatched and running.job is not None:
            running.job.cancel()


def _done(running: _Running) -> bool:
    return running.job is None or running.job.done()


def _log_incident(what: str, exc: BaseException) -> str:
    """Log the exception type and an incident id only: messages can carry stored data."""
    incident = str(uuid.uuid4())
    log.error("%s: %s (incident %s)", what, type(exc).__name__, incident)
    return incident


def _pool_conninfo(db: Database) -> str:
    conninfo = db.pool.conninfo
    if not isinstance(conninfo, str):
        raise ValueError("the pool's conninfo is computed: pass conninfo= to the Executor")
    return conninfo
