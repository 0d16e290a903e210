"""The front door of workflow_invoke: bounded work in progress, refusals decided on arrival.

Under overload one service process could not even look at the calls it would refuse: every
request was parsed, both bearers verified, its input validated and one statement run before
the deadline-aware controller (runtime.admission.controller) spoke, while the event loop was
saturated with the calls it had already taken. Goodput fell to a quarter of the peak at twice
the capacity, and admitted calls waited out most of their deadline.

The door sits in front of all of that (runtime.composition.front_door reads only the JSON-RPC id and
era of the body). At most `door_concurrency` calls are past the door and not yet started at
once; the others wait in arrival order, costing a suspended coroutine and nothing else. A call
leaves the door when its run starts (its first task is claimed by an executor of this
process, in the admission statement itself when a slot is free), when its admission is
decided otherwise (a re-attach, a replay, a refusal), or when its answer is sent, whichever is
first. So the door bounds the runs admitted and not yet started as well as the admissions in
progress: when the executors fall behind, calls wait at the door, where waiting is cheap and
measured, instead of in the task queue; and a place is never held while a run works.

Of those places, at most `door_admitting` are held by calls whose admission is not decided
yet (bearers, schemas, the admission statement): the work that competes with the refusals for
the event loop. A call whose run waits for an executor slot keeps its place but frees its
admission. Few admissions at once answer refusals sooner (on one Tool at twice its capacity,
p50 12-15 ms with 16 at once, 5-8 ms with 4, 2-3 ms with 2) without starving the executor of
queued runs, which only the places bound.

On arrival, with calls already waiting, the door predicts how long this one would wait: the
calls ahead of it over the rate at which the door has let calls through (the last second). It
refuses the call at once, with WORKFLOW_CAPACITY_EXHAUSTED and retryAfterMs, when

- that wait times the safety factor fits no budget (min of syncWaitMs and totalDeadlineMs) of
  the Tools this process has admitted: no Tool's deadline could be met (seed 001: refuse
  before acceptance when the remaining deadline cannot be met); or
- the queue stands beyond `door_queue_target_ms` (the oldest waiting call has waited longer),
  this call would wait longer still, and new calls arrive faster than the door lets calls
  through. As in CoDel, a burst that drains is let through and only a standing queue is
  refused: under sustained overload the calls served are served within the target instead
  of every call waiting out most of its deadline, and the excess learns at once when to come
  back (retryAfterMs).

A standing queue that does not grow is not overload but a closed loop: its callers send a new
call only when an answer arrives, so refusing them shortens nothing. Worse, a caller that
retries a refusal at once (an impatient agent, ignoring retryAfterMs) would spin on the door,
and the spinning would take the CPU the served calls need. So the target rule refuses only
while fresh calls arrive faster than calls pass, and a retry of a call refused here (the same
arguments, before its retryAfterMs is up) is never refused by the target rule: it waits for
its turn instead. Only the deadline rule above refuses it again.

The door knows the call's Tool only by its unverified arguments, so it judges against no
single Tool's budget (which would tell an unauthenticated caller that a Tool exists); the
call's own budget is judged by the controller after authentication, counting the time it
spent at the door.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from runtime.admission.controller import CapacityEstimator
from runtime.admission.prediction import retry_after_ms
from runtime.admission.settings import CapacitySettings
from runtime.telemetry import metrics

# Passes through the door are counted per bucket over this window: the door's rate.
_WINDOW_S = 1.0
_BUCKETS = 10
# Fresh arrivals must outpace passes by this factor for the queue target to refuse (a closed
# loop's arrivals equal its passes, give or take a bucket's noise).
_OUTPACED = 1.1
# Refused calls remembered (their fingerprints), to tell an early retry from a fresh call.
_REFUSALS_KEPT = 4096


class _Rate:
    """Events per second over the last window (a ring of buckets).

    Over the time the window has seen events, not the whole window: when events start after a
    quiet spell (a burst at an idle door), a second-long window would count a fraction of a
    second of them as a second's worth, and a door that has just let its first calls through
    would predict a wait many times too long and refuse calls that fit their deadline.
    """

    def __init__(self) -> None:
        self._width = _WINDOW_S / _BUCKETS
        self._counts = [0] * _BUCKETS
        self._last: int | None = None
        # When the first event since the window was last empty came.
        self._first: float | None = None

    def add(self, now: float) -> None:
        self._advance(now)
        if self._first is None:
            self._first = now
        self._counts[int(now / self._width) % _BUCKETS] += 1

    def per_s(self, now: float) -> float:
        """Events over the whole window, per second (two rates compare over one span)."""
        self._advance(now)
        return sum(self._counts) / _WINDOW_S

    def measured_per_s(self, now: float) -> float:
        """Events per second over the part of the window that has seen events."""
        self._advance(now)
        total = sum(self._counts)
        if total == 0 or self._first is None:
            return 0.0
        # At least one bucket: one event is not a rate of thousands a second.
        span = min(_WINDOW_S, max(now - self._first, self._width))
        return total / span

    def _advance(self, now: float) -> None:
        current = int(now / self._width)
        gap = _BUCKETS if self._last is None else current - self._last
        # Buckets the clock moved past since the last event hold nothing of the window now.
        for step in range(min(max(gap, 0), _BUCKETS)):
            self._counts[(current - step) % _BUCKETS] = 0
        if gap > 0:
            self._last = current
        if self._first is not None and not any(self._counts):
            self._first = None


class DoorClosed(Exception):
    """The process is shutting down: a call waiting at the door is answered, not served."""


class Pass:
    """One call's place past the door; leave() (idempotent) gives it to the next caller."""

    __slots__ = ("_admitting", "_door", "process_id")

    def __init__(self, door: FrontDoor) -> None:
        self._door: FrontDoor | None = door
        # Whether the call's admission is still undecided (it counts against door_admitting).
        self._admitting = True
        # The run this call admits, while its place waits for the run's first task to start.
        self.process_id: str | None = None

    def decided(self) -> None:
        """The call's admission is decided; its place is kept until its run starts."""
        if self._admitting and self._door is not None:
            self._admitting = False
            self._door._decided()

    def leave(self) -> None:
        """The call's run started (or its admission failed, or its answer is sent)."""
        door, self._door = self._door, None
        if door is not None:
            if self.process_id is not None:
                door._starting.pop(self.process_id, None)
            door._leave(admitting=self._admitting)
            self._admitting = False


class FrontDoor:
    """At most `limit` calls past the door and not started (`door_admitting` of them not yet
    admitted); the rest wait in arrival order."""

    def __init__(
        self,
        estimator: CapacityEstimator | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # The controller of the same process: the budgets of the Tools it admitted.
        self.estimator = estimator
        self.clock = clock
        self.settings = CapacitySettings()
        self.inside = 0
        # Of those, the calls whose admission is not decided yet.
        self.admitting = 0
        # (arrived at, its turn) of each waiting call, oldest first.
        self._waiting: deque[tuple[float, asyncio.Future[None]]] = deque()
        self._passes = _Rate()
        self._arrivals = _Rate()
        # Fingerprint of a refused call's arguments -> when its retryAfterMs is up.
        self._refused: OrderedDict[int, float] = OrderedDict()
        # Places held until the first task of their run starts (process id -> place).
        self._starting: dict[str, Pass] = {}
        self.closed = False

    @property
    def limit(self) -> int:
        """How many calls may be past the door with their run not started (0: no door)."""
        return self.settings.door_concurrency

    @property
    def waiting(self) -> int:
        """Calls waiting at the door."""
        return len(self._waiting)

    def configure(self, settings: CapacitySettings) -> None:
        """Apply the capacity section (its door bounds, safety factor, retry bounds)."""
        self.settings = settings

    def close(self) -> None:
        """Shutdown: the calls waiting are answered now (DoorClosed), and so is every new one."""
        self.closed = True
        while self._waiting:
            _, turn = self._waiting.popleft()
            if not turn.done():
                turn.set_exception(DoorClosed())

    def judge(self, now: float | None = None, fingerprint: int | None = None) -> int | None:
        """retryAfterMs for a call arriving now that should not wait at the door, else None.

        fingerprint identifies the call's arguments: a retry of a call this door refused
        carries the same one.
        """
        settings = self.settings
        if self.closed:
            return settings.retry_after_min_ms
        now = self.clock() if now is None else now
        early_retry = self._early_retry(fingerprint, now)
        if not early_retry:
            self._arrivals.add(now)
        if not settings.enabled or self.limit <= 0 or not self._waiting:
            return None
        rate = self._passes.measured_per_s(now)
        wait_ms = (len(self._waiting) + 1) / rate * 1000 if rate > 0 else math.inf
        allowed = math.inf
        budget_ms = None if self.estimator is None else self.estimator.longest_budget_ms()
        if budget_ms is not None:
            allowed = budget_ms / settings.safety_factor
        target = settings.door_queue_target_ms
        oldest_ms = (now - self._waiting[0][0]) * 1000
        if (
            target is not None
            and oldest_ms > target
            and not early_retry
            and self._arrivals.per_s(now) > self._passes.per_s(now) * _OUTPACED
        ):
            # A standing queue that grows: nothing drained it within the target.
            allowed = min(allowed, float(target))
        if wait_ms <= allowed:
            return None
        # The wait until the queue ahead has drained to what is allowed (unscaled time).
        excess = min(wait_ms - allowed, float(settings.retry_after_max_ms))
        retry_after = retry_after_ms(
            excess, 1.0, settings.retry_after_min_ms, settings.retry_after_max_ms
        )
        self._remember_refusal(fingerprint, now + retry_after / 1000)
        return retry_after

    def _early_retry(self, fingerprint: int | None, now: float) -> bool:
        """Whether this call repeats one refused here whose retryAfterMs is not up yet."""
        if fingerprint is None:
            return False
        due = self._refused.get(fingerprint)
        if due is None:
            return False
        if now >= due:
            del self._refused[fingerprint]
            return False
        return True

    def _remember_refusal(self, fingerprint: int | None, due: float) -> None:
        if fingerprint is None:
            return
        self._refused[fingerprint] = due
        self._refused.move_to_end(fingerprint)
        while len(self._refused) > _REFUSALS_KEPT:
            self._refused.popitem(last=False)

    async def enter(self, arrived_at: float | None = None) -> Pass:
        """Wait for a place past the door (at once while there is room and nobody waits)."""
        if self.limit <= 0:
            return Pass(self)
        if not self._waiting and self._has_room():
            self._take_place()
            metrics.record_door(self.inside, 0, self.admitting)
            return Pass(self)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self.clock() if arrived_at is None else arrived_at, turn)
        self._waiting.append(entry)
        metrics.record_door(self.inside, len(self._waiting), self.admitting)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                # Handed a place just as it was cancelled: pass it on.
                self._leave(admitting=True)
            else:
                self._waiting.remove(entry)
                metrics.record_door(self.inside, len(self._waiting), self.admitting)
            raise
        return Pass(self)

    def started(self, process_id: str) -> None:
        """An executor of this process started a task of run process_id (frees its call's place)."""
        place = self._starting.pop(process_id, None)
        if place is not None:
            place.leave()

    def _has_room(self) -> bool:
        admitting_limit = self.settings.door_admitting
        return self.inside < self.limit and (
            admitting_limit <= 0 or self.admitting < admitting_limit
        )

    def _take_place(self) -> None:
        self.inside += 1
        self.admitting += 1
        self._passes.add(self.clock())

    def _decided(self) -> None:
        self.admitting = max(0, self.admitting - 1)
        self._let_in()

    def _leave(self, *, admitting: bool) -> None:
        if self.limit <= 0:
            return
        if admitting:
            self.admitting = max(0, self.admitting - 1)
        self.inside = max(0, self.inside - 1)
        self._let_in()

    def _let_in(self) -> None:
        """Hand the free places to the calls waiting longest."""
        while self._waiting and self._has_room():
            _, turn = self._waiting.popleft()
            if not turn.done():
                self._take_place()
                turn.set_result(None)
        metrics.record_door(self.inside, len(self._waiting), self.admitting)


# The call this task serves: when it arrived at the door, and its place past the door. The
# ASGI front door (runtime.composition.front_door) sets it for the task that then runs the
# handler, so the place travels with the call through the protocol layers without each of
# them carrying it.
# It is per task (per request), not process state: the process's door is the FrontDoor above.
_CALL: contextvars.ContextVar[tuple[float, Pass] | None] = contextvars.ContextVar(
    "front_door_call", default=None
)


def passed(arrived_at: float, place: Pass) -> None:
    """Record, for the admission this task runs next, when its call arrived and its place."""
    _CALL.set((arrived_at, place))


def arrived_at() -> float | None:
    """When the call this task serves arrived at the door (None: it came another way)."""
    call = _CALL.get()
    return None if call is None else call[0]


def expect_start(process_id: str) -> None:
    """The call this task serves admits run process_id: its place waits for the run to start."""
    call = _CALL.get()
    if call is not None and call[1]._door is not None:
        call[1].process_id = process_id
        call[1]._door._starting[process_id] = call[1]


def admitted(*, queued: bool) -> None:
    """The admission of the call this task serves is decided.

    queued: its run was admitted with its first task left ready in the queue, so the place
    is kept until an executor of this process starts that task (or the answer is sent);
    otherwise (the task already claimed, a re-attach, a replay, a refusal) it goes now.
    """
    call = _CALL.get()
    if call is None:
        return
    if queued:
        call[1].decided()
    else:
        call[1].leave()
