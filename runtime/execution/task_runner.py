"""The task runner: runs a workflow one top-level task per scheduler task.

Why one top-level task per scheduler task: the interpreter's checkpoint (RunState JSON) is the
payload of the NEXT task, and the scheduler inserts that task in the same fenced transaction
that completes the current one. A checkpoint therefore exists exactly when its task's
completion committed under a live lease: a stale worker can neither record progress nor lose
it, and a reclaimed task restarts from the last committed checkpoint with nothing in between.
Calls inside the re-run task replay from the step ledger (confirmed writes resume from their
recorded output; possible writes are refused rather than sent twice).

Budget (one ledger row per run, every debit a fenced conditional reservation):
- task attempts are DISPATCH attempts (seed 001 "Synchronous Tools": attempts are retries of
  calls): each outbound HTTP or MCP dispatch, retries included, reserves one attempt; claiming
  a scheduler task costs none (the handler is DispatchBudgeted), so an eight-task run without
  calls spends no attempt, and a reclaim after a crash is bounded by the run deadline;
- nested calls: one per MCP tools/call; request bytes: the encoded request body;
- intermediate bytes: the canonical JSON size of each committed checkpoint (RunState);
- result bytes: the canonical JSON size of the public result;
- cost units: one per dispatch, plus, at each top-level task, one for the task and one per
  started CEL_STEPS_PER_COST_UNIT CEL evaluation steps (the deterministic step meter).
A failed reservation is WORKFLOW_BUDGET_EXHAUSTED; nothing past it is sent or committed. The
checkpoint and result bytes and the task's cost units are debited in the transaction that
completes the task (TaskOutcome.consume), so pure work commits once per top-level task.

CPU (issue 9): the interpreter runs on an engine thread, off the serving loop
(``runtime.engine.run.engine_threads`` says why), so lease renewal and every request go on
while a task computes; its effects still run on the serving loop with the fencing above.
Each task attempt runs under a deterministic step budget (``runtime.engine.step_meter``): the
smaller of the ``task_step_budget`` setting and the run's maximumCostUnits in steps. A task
that exceeds it ends the run WORKFLOW_BUDGET_EXHAUSTED on that attempt, at the same step
every time, never by a lapsed lease and a reclaim.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from runtime import human_tasks
from runtime.addresses import AddressPolicy, Resolver, SystemResolver
from runtime.binding_reach import Reach
from runtime.engine import WorkflowDefinition, parse_definition
from runtime.engine.cel import canonical_size
from runtime.engine.run import (
    AwaitingAnswer,
    AwaitingTimer,
    EffectFailure,
    EngineThreads,
    LoopBoundEffects,
    RealClock,
    RunLimits,
    RunOutcome,
    RunState,
    run_workflow,
)
from runtime.engine.run.interpreter import holds_ask
from runtime.engine.step_meter import MemoryBudgetExhausted, StepBudgetExhausted, StepMeter
from runtime.errors import AuthenticationError, WorkflowError
from runtime.execution import store, timers
from runtime.execution.credential import (
    RunToken,
    TokenCheck,
    open_credential,
    select_run_token,
    token_check_for,
)
from runtime.execution.effects import CALL_SLOTS, CallContext, DurableEffects, RunDeadlineExpired
from runtime.execution.outbound.transport import outbound_client
from runtime.execution.service_token import SecretOpener, ServiceTokens
from runtime.execution.settings import ExecutionSettings
from runtime.execution.targets import policy_for
from runtime.execution.token_exchange import TokenExchanger, renew_near_expiry
from runtime.publication.pinned import SecretScopeError, host_secret
from runtime.scheduler import faults
from runtime.scheduler.errors import task_failed, timeout_error
from runtime.scheduler.lease import DispatchBudgeted, TaskHandler, TaskLease
from runtime.scheduler.models import BudgetAmounts, ClaimedTask, NewTask, TaskOutcome
from runtime.security import (
    Keyring,
    KeyringError,
    RunCredentialSettings,
    SecretToken,
    SecuritySettings,
)
from runtime.store import Database

WORKFLOW_TASK_KIND = "workflow"
CEL_STEPS_PER_COST_UNIT = 100
# The ledger is the budget's single authority; the interpreter's own counter must not trip first.
_UNBOUNDED_NESTED_CALLS = 1 << 30
_SPEC_CACHE_SIZE = 4096
# Parsed definitions kept per process (pinned versions and start runs), oldest out first.
_DEFINITION_CACHE_SIZE = 1024


class _TaskDone(Exception):
    """Raised from on_checkpoint to stop after one top-level task (the interpreter is pure)."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__("top-level task done")
        self.state = state


class DeadlineClock(RealClock):
    """Waits never outlast the point the run must stop (its deadline, or a disabled ceiling)."""

    def __init__(self, stop_at: datetime) -> None:
        self._deadline = stop_at

    async def sleep(self, seconds: float) -> None:
        """Sleep, or sleep until the deadline and end the run."""
        remaining = (self._deadline - datetime.now(UTC)).total_seconds()
        if seconds >= remaining:
            await asyncio.sleep(max(remaining, 0))
            raise RunDeadlineExpired()
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class _Loaded:
    spec: store.RunSpec
    definition: WorkflowDefinition
    reach: Reach | None


@dataclass
class WorkflowRuntime:
    """Process-wide configuration and caches of the workflow handler."""

    settings: ExecutionSettings
    keyring: Keyring
    # Real verification of the run's token before every call (None: its stored exp only).
    token_check: TokenCheck | None = None
    transport: httpx.AsyncBaseTransport | None = None
    # Internal networks outbound connections may reach (publication.destinations.allowed_networks).
    destinations: AddressPolicy = field(default_factory=AddressPolicy)
    resolver: Resolver = field(default_factory=SystemResolver)
    # run_credential.original_token_margin_seconds of the security settings (one place only).
    token_margin_seconds: int = RunCredentialSettings().original_token_margin_seconds
    # RFC 8693 exchange for workflow_start runs near their token's expiry (None: not configured).
    exchanger: TokenExchanger | None = None
    # Where interpretation runs: off the serving loop (runtime.engine.run.engine_threads).
    engine: EngineThreads = field(default_factory=EngineThreads)
    # execution.maximum_parallelism: the service's fork-width ceiling over every run's own.
    maximum_parallelism: int | None = None
    # Workflow's own token for nested MCP calls (execution.outbound.service_token when None).
    service_tokens: ServiceTokens | None = None
    _definitions: dict[tuple[str, ...], WorkflowDefinition] = field(default_factory=dict)
    _reaches: dict[tuple[str, str], Reach] = field(default_factory=dict)
    _specs: dict[tuple[str, str], store.RunSpec] = field(default_factory=dict)
    _clients: dict[int, httpx.AsyncClient] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.engine.on_loop_steps = self.settings.on_loop_steps
        if self.service_tokens is None and self.settings.service_token.client_secret_name is None:
            # One per process: every run's nested calls share the token and its renewal.
            self.service_tokens = ServiceTokens.from_settings(self.settings.service_token)

    @classmethod
    def verifying(
        cls,
        settings: ExecutionSettings,
        keyring: Keyring,
        security: SecuritySettings,
        *,
        destinations: AddressPolicy | None = None,
        resolver: Resolver | None = None,
        maximum_parallelism: int | None = None,
        database: Database | None = None,
    ) -> WorkflowRuntime:
        """A runtime that verifies each run's token with the service's security settings.

        database: where the host secret store is, for a client secret kept there.
        """
        service_tokens = None
        if database is not None and settings.service_token.client_secret_name is not None:
            service_tokens = ServiceTokens.from_settings(
                settings.service_token, open_secret=_secret_opener(database, keyring)
            )
        return cls(
            settings,
            keyring,
            token_check=token_check_for(security),
            token_margin_seconds=security.run_credential.original_token_margin_seconds,
            destinations=AddressPolicy() if destinations is None else destinations,
            resolver=SystemResolver() if resolver is None else resolver,
            maximum_parallelism=maximum_parallelism,
            exchanger=TokenExchanger.from_settings(security.run_credential.token_exchange),
            service_tokens=service_tokens,
        )

    def handlers(self) -> dict[str, TaskHandler]:
        """The task handlers to give an Executor (each dispatch charges its own attempt)."""
        # Imported here: the compensation handler builds on this runtime.
        from runtime.execution.compensation import COMPENSATION_TASK_KIND, CompensationRunner

        compensate = CompensationRunner(self)
        return {
            WORKFLOW_TASK_KIND: DispatchBudgeted(self.handle),
            COMPENSATION_TASK_KIND: DispatchBudgeted(compensate.handle),
        }

    def client(self) -> httpx.AsyncClient:
        """One pooled HTTP client per event loop (pools cannot cross loops)."""
        key = id(asyncio.get_running_loop())
        client = self._clients.get(key)
        if client is None or client.is_closed:
            client = outbound_client(self.destinations, self.resolver, self.transport)
            self._clients[key] = client
        return client

    async def aclose(self) -> None:
        """Close the HTTP clients."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
        # Joined off the loop: an engine thread still finishing an attempt may need this loop
        # (its effects run here), so a blocking join on the loop could wait on itself.
        await asyncio.to_thread(self.engine.close)

    async def handle(self, task: ClaimedTask, lease: TaskLease) -> TaskOutcome:
        """Run the next top-level task of the run; the checkpoint rides on the next task."""
        db = lease.database
        loaded = await self._load(db, task)
        # A top-level task resumed from a timer replays its writes at its first task's steps.
        base = timers.write_base(task)
        ledgered = task if base == task.step_no else dataclasses.replace(task, step_no=base)
        replays = task.attempts > 1 or timers.resumed(task)
        prior = await self._prior_calls(db, ledgered) if replays else {}
        effects = DurableEffects(self._call_context(db, ledgered, lease, loaded, prior))
        resume = RunState.from_json(task.payload["state"]) if "state" in task.payload else None
        recorded_timers = timers.recorded_timers(task)
        answers: dict[str, dict[str, Any]] = {}
        if resume is not None and _asks_at(loaded.definition, resume.position):
            # None: the ask it waits on is still open (an early wake); it parks again.
            answers = await human_tasks.settle(db, task, resume.position) or {}
        # Lets a test kill a worker at an exact top-level task (after its claim).
        await faults.point(f"before_workflow_task_{resume.position if resume else 0}")
        meter = StepMeter(self._step_budget(loaded))
        journal = timers.ReadJournal(effects, task)
        bound_effects = LoopBoundEffects(journal, asyncio.get_running_loop())
        clock = DeadlineClock(_stop_at(task, self.settings))
        stop_after_task = _stop_after_task(len(loaded.definition.tasks.tasks))

        async def interpret() -> RunOutcome:
            # A fresh state per start: an attempt that leaves the loop starts over on a thread,
            # and the first start's exports replaced the context of the state it was given.
            state = None
            if resume is not None:
                state = RunState.from_json(task.payload["state"])
                state.answers = answers
                state.timers = dict(recorded_timers)
                state.parked = timers.parked_at(task)
            return await run_workflow(
                loaded.definition,
                task.payload.get("input"),
                bound_effects,
                _limits(loaded, self.maximum_parallelism, self.settings),
                clock=clock,
                resume=state,
                on_checkpoint=stop_after_task,
            )

        try:
            outcome = await self.engine.run(interpret, meter)
        except _TaskDone as done:
            await _check_deadline(db, task, self.settings)
            used = BudgetAmounts(
                intermediate_bytes=canonical_size(done.state), cost_units=_cost(meter)
            )
            next_task = NewTask(
                WORKFLOW_TASK_KIND, {"state": done.state}, step_no=task.step_no + CALL_SLOTS
            )
            return TaskOutcome.then(
                next_task, output={"position": done.state["position"]}, consume=used
            )
        except AwaitingAnswer as waiting:
            return await self._park(db, task, loaded, waiting, meter, recorded_timers)
        except AwaitingTimer as timer:
            return await self._park_on_timer(db, task, timer, journal, meter)
        except RunDeadlineExpired:
            raise timeout_error(after_effect=await _effect_seen(db, task)) from None
        except StepBudgetExhausted as exhausted:
            await _check_deadline(db, task, self.settings)
            raise _steps_exhausted(exhausted) from None
        await _check_deadline(db, task, self.settings, finished=outcome.status == "completed")
        if outcome.status == "completed":
            used = BudgetAmounts(
                result_bytes=canonical_size(outcome.output), cost_units=_cost(meter)
            )
            return TaskOutcome.finish_run(outcome.output, output={"finished": True}, consume=used)
        raise _run_error(outcome.error)

    async def _park(
        self,
        db: Database,
        task: ClaimedTask,
        loaded: _Loaded,
        waiting: AwaitingAnswer,
        meter: StepMeter,
        recorded_timers: dict[str, float],
    ) -> TaskOutcome:
        """Open the ask's human task; the next task waits, unleased, until it is answered.

        Its available_at is the task's due time (the timer: the claim fires it) or, with no
        timeout, the point the run must stop; an answer makes it available at once. Its insert
        parks the run (migration 0080's trigger, runtime/human_tasks/parking.py).
        """
        await _check_deadline(db, task, self.settings)
        human_task_id, due = await human_tasks.park(
            db, task, loaded.spec.wf_def_id, waiting.request
        )
        payload = human_tasks.parked_task_payload(waiting.state, human_task_id)
        if recorded_timers:
            # Its top-level task parked on a timer before this ask: the replay keeps its time.
            payload |= timers.replay_payload(task, timers.without_anchors(recorded_timers))
        wake_at = due if due is not None else _stop_at(task, self.settings)
        next_task = NewTask(
            WORKFLOW_TASK_KIND, payload, step_no=task.step_no + CALL_SLOTS, available_at=wake_at
        )
        used = BudgetAmounts(
            intermediate_bytes=canonical_size(waiting.state), cost_units=_cost(meter)
        )
        return TaskOutcome.then(next_task, output={"waiting": human_task_id}, consume=used)

    async def _park_on_timer(
        self,
        db: Database,
        task: ClaimedTask,
        timer: AwaitingTimer,
        journal: timers.ReadJournal,
        meter: StepMeter,
    ) -> TaskOutcome:
        """Give the slot back: the next task replays this top-level task at the due time.

        runtime.execution.timers says why the due time is durable once this task completes.
        """
        await _check_deadline(db, task, self.settings)
        wake_at = timers.wake_at(timer, _stop_at(task, self.settings))
        next_task = NewTask(
            WORKFLOW_TASK_KIND,
            timers.parked_payload(task, timer, journal),
            step_no=task.step_no + CALL_SLOTS,
            available_at=wake_at,
        )
        # The journaled reads are kept like the checkpoint: they count as intermediate bytes.
        kept = canonical_size(timer.state) + canonical_size(journal.entries)
        used = BudgetAmounts(intermediate_bytes=kept, cost_units=_cost(meter))
        return TaskOutcome.then(next_task, output={"timer": wake_at.isoformat()}, consume=used)

    def _step_budget(self, loaded: _Loaded) -> int:
        """Steps one task attempt may spend: the setting, capped by the run's cost units."""
        budget = self.settings.task_step_budget
        cost_units = loaded.spec.limits.maximum_cost_units
        if cost_units is not None:
            # A task's own unit is spent first; the rest buys CEL_STEPS_PER_COST_UNIT each.
            budget = min(budget, max(cost_units - 1, 0) * CEL_STEPS_PER_COST_UNIT)
        return budget

    async def _load(self, db: Database, task: ClaimedTask) -> _Loaded:
        # The first task carries the run's spec; the pinned definition and the revision's
        # reach never change, so a warm run reads nothing here.
        spec = store.spec_from_payload(
            task.host_id, task.process_id, task.payload
        ) or self._specs.get((task.host_id, task.process_id))
        if spec is not None:
            self._remember(spec)
        definition = self._cached_definition(spec)
        reach = self._cached_reach(spec)
        if spec is not None and (reach is not None or spec.binding_id is None):
            if definition is not None:
                return _Loaded(spec, definition, reach)
            if spec.definition is not None:
                return _Loaded(spec, self._parsed(spec, spec.definition), reach)
        async with db.transaction(read_only=True) as conn:
            if spec is None:
                spec = await store.select_run_spec(conn, task.host_id, task.process_id)
            if spec is None:
                raise task_failed("the run has no execution record")
            self._remember(spec)
            if spec.binding_id is not None:
                # The run's own pinned revision, never the Tool's currently active one.
                reach = self._cached_reach(spec) or await store.select_reach(
                    conn, task.host_id, spec.binding_id
                )
                self._reaches[(task.host_id, spec.binding_id)] = reach
            definition = self._cached_definition(spec)
            if definition is not None:
                return _Loaded(spec, definition, reach)
            document = spec.definition
            if document is None and spec.wf_def_id and spec.workflow_version:
                document = await store.select_definition_document(
                    conn, task.host_id, spec.wf_def_id, spec.workflow_version
                )
        if document is None:
            raise task_failed("the run's pinned definition version does not exist")
        return _Loaded(spec, self._parsed(spec, document), reach)

    def _parsed(self, spec: store.RunSpec, document: dict[str, Any]) -> WorkflowDefinition:
        # Parsing costs in proportion to the definition: once per pinned version, and once per
        # start run (whose saved document is fixed in its spec), never once per task.
        definition = parse_definition(document)
        key = _definition_key(spec)
        if key is not None:
            if len(self._definitions) >= _DEFINITION_CACHE_SIZE:
                del self._definitions[next(iter(self._definitions))]
            self._definitions[key] = definition
        return definition

    def _remember(self, spec: store.RunSpec) -> None:
        # A run's spec never changes; the cache only spares later tasks of a run a read.
        if len(self._specs) >= _SPEC_CACHE_SIZE:
            del self._specs[next(iter(self._specs))]
        self._specs[(spec.host_id, spec.process_id)] = spec

    def _cached_definition(self, spec: store.RunSpec | None) -> WorkflowDefinition | None:
        key = None if spec is None else _definition_key(spec)
        return None if key is None else self._definitions.get(key)

    def _cached_reach(self, spec: store.RunSpec | None) -> Reach | None:
        if spec is None or spec.binding_id is None:
            return None
        return self._reaches.get((spec.host_id, spec.binding_id))

    async def _prior_calls(self, db: Database, task: ClaimedTask) -> dict[int, store.CallStep]:
        async with db.transaction(read_only=True) as conn:
            return await store.select_call_steps(
                conn, task.host_id, task.process_id, task.step_no, task.step_no + CALL_SLOTS
            )

    def _call_context(
        self,
        db: Database,
        task: ClaimedTask,
        lease: TaskLease,
        loaded: _Loaded,
        prior: dict[int, store.CallStep],
    ) -> CallContext:
        targets = None if loaded.reach is None else loaded.reach.endpoint_targets
        policy = policy_for(targets, self.settings.http_allowlist, self.settings.environment)

        # Only workflow_start runs (no binding revision) may outlive their token by exchange.
        exchangeable = loaded.spec.binding_id is None

        async def token() -> RunToken:
            return await self._run_token(db, task, exchangeable)

        async def secret(name: str) -> SecretToken:
            return await self._host_secret(db, task.host_id, name, loaded.spec.wf_def_id)

        return CallContext(
            db=db,
            task=task,
            lease=lease,
            settings=self.settings,
            policy=policy,
            client=self.client(),
            user_id=loaded.spec.user_id,
            wf_def_id=loaded.spec.wf_def_id,
            reach=loaded.reach,
            token=token,
            prior_calls=prior,
            secret=secret,
            service_token=self.service_tokens,
        )

    async def _host_secret(
        self, db: Database, host_id: str, name: str, wf_def_id: str | None
    ) -> SecretToken:
        # Read at every dispatch, never cached: the next call after a rotation sends the new
        # value, and a deleted (or re-scoped) secret stops it. Errors name the secret, never
        # its value.
        async with db.transaction(read_only=True) as conn:
            try:
                # A run always names its definition; "" (never a wfDefId) is out of any scope.
                value = await host_secret(conn, self.keyring, host_id, name, wf_def_id or "")
            except KeyringError:
                raise EffectFailure(
                    "authentication", f"secret {name} cannot be opened with the keyring", 401
                ) from None
            except SecretScopeError:
                raise EffectFailure(
                    "authorization",
                    f"secret {name} may not be used by this definition: its scope "
                    "(workflow_secret_put definitions) does not name it",
                    403,
                ) from None
        if value is None:
            raise EffectFailure("authorization", f"the host holds no secret named {name}", 403)
        return value

    async def _run_token(self, db: Database, task: ClaimedTask, exchangeable: bool) -> RunToken:
        async with db.transaction(read_only=True) as conn:
            stored = await store.select_credential(conn, task.host_id, task.process_id)
        try:
            if stored is None:
                raise AuthenticationError("the run has no stored credential")
            token = open_credential(self.keyring, stored.sealed, task.host_id, task.process_id)
            expires_at, exchanged = stored.token_expires_ts, stored.exchanged
            if exchangeable and self.exchanger is not None:
                where = (task.host_id, task.process_id)
                token, expires_at, exchanged = await renew_near_expiry(
                    db, self.keyring, self.exchanger, where, stored, token,
                    self.token_margin_seconds,
                )  # fmt: skip
            selected = select_run_token(
                token,
                expires_at,
                margin_seconds=self.token_margin_seconds,
                check=self.token_check,
            )
            return RunToken(selected, exchanged)
        except AuthenticationError as exc:
            # The call fails with the authentication error (401) before anything is sent;
            # the message names the failed check, never the token's text.
            raise EffectFailure("authentication", exc.message, 401) from None


def _asks_at(definition: WorkflowDefinition, position: int) -> bool:
    """Whether the top-level task at position is or holds an ask (answers are read first)."""
    tasks = definition.tasks.tasks
    if not 0 <= position < len(tasks):
        return False
    return holds_ask(tasks[position])


def _cost(meter: StepMeter) -> int:
    """Cost units of one top-level task: one, plus one per started block of steps."""
    return 1 + -(-meter.steps // CEL_STEPS_PER_COST_UNIT)


def _definition_key(spec: store.RunSpec) -> tuple[str, ...] | None:
    """The parsed-definition cache key: the run for a start run, else the pinned version."""
    if spec.definition is not None:
        return ("run", spec.host_id, spec.process_id)
    if spec.wf_def_id and spec.workflow_version:
        return ("version", spec.host_id, spec.wf_def_id, spec.workflow_version)
    return None


def _steps_exhausted(exhausted: StepBudgetExhausted) -> WorkflowError:
    """WORKFLOW_BUDGET_EXHAUSTED for a task that spent its whole step budget or memory ceiling."""
    limit = exhausted.limit
    if isinstance(exhausted, MemoryBudgetExhausted):
        return WorkflowError(
            "WORKFLOW_BUDGET_EXHAUSTED",
            f"a workflow task built more than its ceiling of {limit} bytes of values",
            status="failed",
            details={"counters": ["cost_units"], "memoryCeilingBytes": limit},
        )
    return WorkflowError(
        "WORKFLOW_BUDGET_EXHAUSTED",
        f"a workflow task spent its budget of {limit} evaluation steps",
        status="failed",
        details={"counters": ["cost_units"], "stepBudget": limit},
    )


def _stop_after_task(task_count: int) -> Any:
    async def checkpoint(state: RunState) -> None:
        if not state.finished and state.position < task_count:
            raise _TaskDone(state.to_json())

    return checkpoint


def _limits(
    loaded: _Loaded,
    parallelism_ceiling: int | None = None,
    settings: ExecutionSettings | None = None,
) -> RunLimits:
    limits = loaded.spec.limits
    read_only: set[str] = set()
    if loaded.reach is not None:
        for dependency in loaded.reach.dependencies:
            if dependency.annotations is not None and dependency.annotations.read_only:
                read_only |= {dependency.authorization_tool_name, dependency.dispatch_target}
    return RunLimits(
        total_deadline_ms=None,  # the durable deadline is enforced here, not by asyncio.timeout
        maximum_task_attempts=limits.maximum_task_attempts,
        maximum_parallelism=min(limits.maximum_parallelism, parallelism_ceiling or sys.maxsize),
        maximum_nested_calls=_UNBOUNDED_NESTED_CALLS,
        read_only_tools=frozenset(read_only),
        in_slot_wait_s=None if settings is None else settings.in_slot_wait_ms / 1000,
    )


async def _effect_seen(db: Database, task: ClaimedTask) -> bool:
    async with db.transaction(read_only=True) as conn:
        row = await store.select_process_state(conn, task.host_id, task.process_id)
    return row is not None and row.effect_state != "none"


def _run_error(error: WorkflowError | None) -> WorkflowError:
    """The error a faulted run ends with.

    The definition's own workflow timeout caps the run's deadline at admission, so when the
    engine reports it the deadline has passed: the run ends as every deadline end does.
    """
    if error is None:
        return task_failed()
    if error.code == "WORKFLOW_TIMEOUT":
        return timeout_error(after_effect=error.after_effect)
    return error


def _stop_at(task: ClaimedTask, settings: ExecutionSettings) -> datetime:
    """When nothing new may start: the deadline, or for a disabled policy its hard ceiling.

    cancellationPolicy: disabled means the caller cannot cancel the run, not that it may run
    for ever: past the deadline plus the write overrun it stops like any other (seed 000
    "Waiting, timeout and re-attach"; the scheduler's claims, leases and sweep use the same).
    """
    if task.cancellation_policy == "disabled":
        return task.deadline_ts + timedelta(seconds=settings.write_overrun_s)
    return task.deadline_ts


async def _check_deadline(
    db: Database, task: ClaimedTask, settings: ExecutionSettings, *, finished: bool = False
) -> None:
    """Past the deadline nothing new starts: the run ends with a stable WORKFLOW_TIMEOUT.

    A run that finished after dispatching an effect keeps its result (seed 000 "Waiting,
    timeout and re-attach"): the write was left to finish, so its output is what a retry
    within the replay window must get; throwing it away would only invite a second write.
    """
    if datetime.now(UTC) < _stop_at(task, settings):
        return
    after_effect = await _effect_seen(db, task)
    if finished and after_effect:
        return
    raise timeout_error(after_effect=after_effect)


def _secret_opener(db: Database, keyring: Keyring) -> SecretOpener:
    """Reads a host secret from the store of db, opened with keyring."""

    async def open_secret(host_id: str, name: str) -> SecretToken | None:
        async with db.transaction(read_only=True) as conn:
            return await host_secret(conn, keyring, host_id, name)

    return open_secret
