"""A popular Tool's admissions that wait on each other go to PostgreSQL as one statement.

While a Tool has capacity.admission_statements_per_tool admission statements in flight in this
process, its next calls wait here; as one statement ends, the calls waiting (up to BATCH_MAX)
go together in one statement and one transaction (store.admit_invoke_batch), each in a
subtransaction of its own. So under load the event loop sends one statement, and PostgreSQL
flushes one commit, for several calls, while a call that arrives with nothing in flight goes
at once, alone, as before. Calls of different Tools never share a statement: one transaction
then holds only one Tool's locks.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from dataclasses import dataclass, field

from runtime.invocation import store
from runtime.scheduler import capacity
from runtime.store import Database, is_connection_error
from runtime.telemetry import metrics

# workflow_admission_batch_max() of migration 0084: the statement refuses a larger batch.
BATCH_MAX = 8

Answer = store.AdmitOutcome | store.AdmissionLimitReached
Waiting = tuple[store.AdmitParams, "asyncio.Future[store.AdmitOutcome]"]


@dataclass
class _ToolAdmissions:
    in_flight: int = 0
    waiting: deque[Waiting] = field(default_factory=deque)


class AdmissionBatcher:
    """Admits calls through one statement each when their Tool is quiet, in batches when not."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._tools: dict[tuple[str, str], _ToolAdmissions] = {}
        # Batches in flight: kept referenced until they end (the loop keeps only weak ones).
        self._batches: set[asyncio.Task[None]] = set()

    async def admit(self, params: store.AdmitParams) -> store.AdmitOutcome:
        """The call's admission (as store.admit_invoke answers it, not exclusive)."""
        key = (params.host_id, params.tool_id)
        tool = self._tools.get(key)
        if tool is None:
            tool = self._tools[key] = _ToolAdmissions()
        if tool.in_flight < capacity.admission_statements_per_tool() and not tool.waiting:
            tool.in_flight += 1
            try:
                return await self._alone(params)
            finally:
                tool.in_flight -= 1
                self._next(key, tool)
        answer: asyncio.Future[store.AdmitOutcome] = asyncio.get_running_loop().create_future()
        tool.waiting.append((params, answer))
        return await answer

    def waiting(self, host_id: str, tool_id: str) -> int:
        """Calls of the Tool waiting here for a statement (inspection, tests)."""
        tool = self._tools.get((host_id, tool_id))
        return 0 if tool is None else len(tool.waiting)

    async def _alone(self, params: store.AdmitParams) -> store.AdmitOutcome:
        metrics.record_admission_statement(1)
        async with self._db.connection() as conn:
            return await store.admit_invoke(conn, params)

    def _next(self, key: tuple[str, str], tool: _ToolAdmissions) -> None:
        """Send the calls waiting for this Tool as batches while it has statements to spare."""
        while tool.in_flight < capacity.admission_statements_per_tool() and tool.waiting:
            batch: list[Waiting] = []
            while tool.waiting and len(batch) < BATCH_MAX:
                waiting = tool.waiting.popleft()
                if not waiting[1].done():  # a caller that went away is not admitted
                    batch.append(waiting)
            if not batch:
                break
            tool.in_flight += 1
            task = asyncio.create_task(self._send(key, tool, batch))
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)
        if tool.in_flight == 0 and not tool.waiting:
            self._tools.pop(key, None)

    async def _send(
        self, key: tuple[str, str], tool: _ToolAdmissions, batch: list[Waiting]
    ) -> None:
        try:
            await self._send_batch(batch)
        finally:
            tool.in_flight -= 1
            self._next(key, tool)

    async def _send_batch(self, batch: list[Waiting]) -> None:
        try:
            if len(batch) == 1:
                answers: list[Answer] = [await self._answer_alone(batch[0][0])]
            else:
                metrics.record_admission_statement(len(batch))
                async with self._db.connection() as conn:
                    answers = await store.admit_invoke_batch(conn, [call for call, _ in batch])
        except BaseException as exc:
            if isinstance(exc, Exception) and not is_connection_error(exc):
                # Not the link: some call failed the whole statement. Each goes again alone, so
                # one call's error is its own and the others are admitted.
                await asyncio.gather(*(self._settle_alone(call, answer) for call, answer in batch))
                return
            for _, answer in batch:
                # Every caller retries a lost link (the retry attaches to what committed).
                _settle(answer, exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, answer), outcome in zip(batch, answers, strict=True):
            _settle(answer, outcome)

    async def _answer_alone(self, params: store.AdmitParams) -> Answer:
        try:
            return await self._alone(params)
        except store.AdmissionLimitReached as reached:
            return reached

    async def _settle_alone(
        self, params: store.AdmitParams, answer: asyncio.Future[store.AdmitOutcome]
    ) -> None:
        try:
            outcome = await self._answer_alone(params)
        except Exception as exc:  # the caller's own error, raised where it awaits
            _settle(answer, exc)
        else:
            _settle(answer, outcome)


def _settle(answer: asyncio.Future[store.AdmitOutcome], outcome: Answer | BaseException) -> None:
    if answer.done():  # its caller went away meanwhile
        return
    if isinstance(outcome, asyncio.CancelledError):
        answer.cancel()
    elif isinstance(outcome, BaseException):
        answer.set_exception(outcome)
    else:
        answer.set_result(outcome)


_BATCHERS: weakref.WeakKeyDictionary[Database, AdmissionBatcher] = weakref.WeakKeyDictionary()


def batcher_of(db: Database) -> AdmissionBatcher:
    """The admission batcher of one database (batches never mix databases)."""
    batcher = _BATCHERS.get(db)
    if batcher is None:
        batcher = _BATCHERS[db] = AdmissionBatcher(db)
    return batcher
