"""A run parked on a durable timer (a long `wait` or retry back-off): its task and its resume.

How a run parks: the interpreter raises AwaitingTimer (runtime.engine.run.timers) and the
runner ends its scheduler task with a successor that carries the checkpoint before the
top-level task, every due time that task recorded (TIMERS_KEY) and the step base its writes
are ledgered at (WRITE_BASE_KEY), with available_at the earliest of the due time and the point
the run must stop. That successor is inserted in the same fenced transaction that completes
the task, so the due time is durable exactly when the slot is given back: a `kill -9` at any
point leaves either the running task (reclaimed, the wait then starts from its last record) or
the parked one, which a restarted executor claims at its original due time.

The resumed top-level task replays: its writes resume from the step ledger at the recorded
base (the successor's own step number is a new one, so without the base they would look
unsent and be sent again), its reads answer from the read journal the parked task carries
(READS_KEY, ReadJournal), and its waits find their due times. Reads are journaled rather than
sent again because a retry's replay would otherwise repeat every earlier attempt (each one
budgeted, and perhaps answered differently this time, which would take the replay down
another path than the one that recorded the timers). A parked run stays RUNNING: nothing but
time is awaited.
"""

from __future__ import annotations

import base64
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from runtime.engine.run import (
    AwaitingTimer,
    EffectFailure,
    EffectPort,
    HttpRequest,
    HttpResponse,
    McpRequest,
)
from runtime.execution.effects import http_fingerprint, mcp_fingerprint
from runtime.scheduler import wakeup
from runtime.scheduler.models import ClaimedTask

TIMERS_KEY = "timers"
WRITE_BASE_KEY = "writeBase"
READS_KEY = "reads"
PARKED_KEY = "parked"
# Scope anchors (runtime.engine.run.timers.anchor) among the recorded timers.
_ANCHOR = "/began#"


def recorded_timers(task: ClaimedTask) -> dict[str, float]:
    """The due times the resumed top-level task recorded (empty unless it parked on one)."""
    return {key: float(due) for key, due in task.payload.get(TIMERS_KEY, {}).items()}


def parked_at(task: ClaimedTask) -> list[str]:
    """The keys of the waits the resumed top-level task parked on (its replay is held)."""
    return list(task.payload.get(PARKED_KEY, []))


def without_anchors(recorded: dict[str, float]) -> dict[str, float]:
    """The recorded timers an ask's replay keeps: its scopes start again, as before timers
    (a task timeout around an ask is not cut by the time a human took to answer)."""
    return {key: due for key, due in recorded.items() if _ANCHOR not in key}


def write_base(task: ClaimedTask) -> int:
    """The step its top-level task's writes are ledgered from: its first task's step number."""
    return int(task.payload.get(WRITE_BASE_KEY, task.step_no))


def resumed(task: ClaimedTask) -> bool:
    """Whether the task resumes a top-level task that already ran (its writes may be ledgered)."""
    return WRITE_BASE_KEY in task.payload


def replay_payload(task: ClaimedTask, timers: dict[str, float]) -> dict[str, Any]:
    """What a parked successor adds to its payload to replay the same top-level task."""
    return {TIMERS_KEY: timers, WRITE_BASE_KEY: write_base(task)}


def parked_payload(
    task: ClaimedTask, waiting: AwaitingTimer, journal: ReadJournal
) -> dict[str, Any]:
    """The parked successor's payload: the checkpoint and the replay record."""
    record = replay_payload(task, waiting.timers)
    parked = {PARKED_KEY: list(waiting.parked)}
    return {"state": waiting.state, **record, READS_KEY: journal.entries, **parked}


def wake_at(waiting: AwaitingTimer, stop_at: datetime) -> datetime:
    """When the parked task becomes available: its due time, never past the run's stop."""
    due = datetime.fromtimestamp(waiting.due, UTC)
    when = min(due, stop_at)
    # This process's executors wake for it then, not only at their next poll.
    wakeup.expect_task_at(when)
    return when


class ReadJournal:
    """An EffectPort that answers a replayed top-level task's reads as they were answered.

    Writes pass through (the step ledger replays them). A read, or its transport failure, is
    answered from the journal of the parked task when one with the same fingerprint is left
    (matched in order, as fork branches may send them in another order), else sent and added.
    """

    def __init__(self, inner: EffectPort, task: ClaimedTask) -> None:
        self._inner = inner
        self.entries: list[dict[str, Any]] = list(task.payload.get(READS_KEY, []))
        self._left: defaultdict[str, deque[dict[str, Any]]] = defaultdict(deque)
        for entry in self.entries:
            self._left[entry["fingerprint"]].append(entry)

    async def call_http(self, request: HttpRequest) -> HttpResponse:
        """A write as sent; a read from the journal, or sent and journaled."""
        if request.write:
            return await self._inner.call_http(request)
        entry = await self._answer(
            http_fingerprint(request), lambda: self._inner.call_http(request)
        )
        if "response" not in entry:
            raise _failure(entry)
        response = entry["response"]
        return HttpResponse(
            status_code=int(response["statusCode"]),
            headers=dict(response["headers"]),
            body=base64.b64decode(response["body"]),
        )

    async def call_mcp(self, request: McpRequest) -> dict[str, Any]:
        """As call_http, for an MCP tools/call."""
        if request.write:
            return await self._inner.call_mcp(request)
        entry = await self._answer(mcp_fingerprint(request), lambda: self._inner.call_mcp(request))
        if "result" not in entry:
            raise _failure(entry)
        return dict(entry["result"])

    async def _answer(self, fingerprint: str, send: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
        left = self._left.get(fingerprint)
        if left:
            return left.popleft()
        entry: dict[str, Any] = {"fingerprint": fingerprint}
        try:
            answer = await send()
        except EffectFailure as failure:
            entry["failure"] = {
                "kind": failure.kind, "message": failure.message, "status": failure.status
            }  # fmt: skip
        else:
            if isinstance(answer, HttpResponse):
                entry["response"] = {
                    "statusCode": answer.status_code,
                    "headers": answer.headers,
                    "body": base64.b64encode(answer.body).decode("ascii"),
                }
            else:
                entry["result"] = answer
        self.entries.append(entry)
        return entry


def _failure(entry: dict[str, Any]) -> EffectFailure:
    failure = entry["failure"]
    return EffectFailure(failure["kind"], failure["message"], failure["status"])
