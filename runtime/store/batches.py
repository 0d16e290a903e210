"""Calls that arrive while their statement's key is busy go to PostgreSQL together.

A key (one Tool's admissions, one process's task completions) has at most a few statements in
flight; a call that finds them all in flight waits here, and as one ends the calls waiting (up
to a batch's size) go as one statement and one transaction. Under load the event loop then
sends one statement, and PostgreSQL flushes one commit, for several calls; a call that finds
its key quiet goes at once, alone. This is group commit, done by the caller.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from runtime.store.database import Connection, Database
from runtime.store.errors import is_connection_error

KeyT = TypeVar("KeyT", bound=Hashable)
CallT = TypeVar("CallT")
AnswerT = TypeVar("AnswerT")


@dataclass
class _Key(Generic[CallT, AnswerT]):
    in_flight: int = 0
    waiting: deque[tuple[CallT, asyncio.Future[AnswerT]]] = field(default_factory=deque)


@dataclass(frozen=True)
class BatchStatements(Generic[CallT, AnswerT]):
    """How one kind of call is sent: alone, or several in one statement."""

    # One call in a statement of its own; what it raises is its caller's.
    alone: Callable[[CallT], Awaitable[AnswerT]]
    # Several calls in one statement: each call's answer, or the exception its caller gets.
    together: Callable[[Sequence[CallT]], Awaitable[Sequence[AnswerT | BaseException]]]
    # The most calls one statement may carry.
    batch_max: int
    # Statements one key may have in flight at once (read at each call: settings may change).
    in_flight: Callable[[], int]
    # Told the size of each statement sent (1: a call alone).
    sent: Callable[[int], None] = lambda calls: None


def on_pool(
    db: Database,
    alone: Callable[[Connection, CallT], Awaitable[AnswerT]],
    together: Callable[[Connection, Sequence[CallT]], Awaitable[Sequence[AnswerT | BaseException]]],
    *,
    batch_max: int,
    in_flight: Callable[[], int],
    sent: Callable[[int], None],
) -> StatementBatcher[Any, CallT, AnswerT]:
    """A batcher whose statements each take a connection of db's pool (alone or together)."""

    async def one(call: CallT) -> AnswerT:
        async with db.connection() as conn:
            return await alone(conn, call)

    async def several(calls: Sequence[CallT]) -> Sequence[AnswerT | BaseException]:
        async with db.connection() as conn:
            return await together(conn, calls)

    return StatementBatcher(BatchStatements(one, several, batch_max, in_flight, sent))


class StatementBatcher(Generic[KeyT, CallT, AnswerT]):
    """Sends each call alone while its key is quiet, with the key's other waiting calls when not."""

    def __init__(self, statements: BatchStatements[CallT, AnswerT]) -> None:
        self._statements = statements
        self._keys: dict[KeyT, _Key[CallT, AnswerT]] = {}
        # Batches in flight: kept referenced until they end (the loop keeps only weak ones).
        self._batches: set[asyncio.Task[None]] = set()

    async def run(self, key: KeyT, call: CallT) -> AnswerT:
        """The call's answer, as its statement gave it (alone or in a batch)."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _Key()
        if state.in_flight < self._statements.in_flight() and not state.waiting:
            state.in_flight += 1
            try:
                self._statements.sent(1)
                return await self._statements.alone(call)
            finally:
                state.in_flight -= 1
                self._next(key, state)
        answer: asyncio.Future[AnswerT] = asyncio.get_running_loop().create_future()
        state.waiting.append((call, answer))
        return await answer

    def waiting(self, key: KeyT) -> int:
        """Calls of the key waiting here for a statement (inspection, tests)."""
        state = self._keys.get(key)
        return 0 if state is None else len(state.waiting)

    def _next(self, key: KeyT, state: _Key[CallT, AnswerT]) -> None:
        """Send the key's waiting calls as batches while it has statements to spare."""
        while state.in_flight < self._statements.in_flight() and state.waiting:
            batch: list[tuple[CallT, asyncio.Future[AnswerT]]] = []
            while state.waiting and len(batch) < self._statements.batch_max:
                waiting = state.waiting.popleft()
                if not waiting[1].done():  # a caller that went away is not sent
                    batch.append(waiting)
            if not batch:
                break
            state.in_flight += 1
            task = asyncio.create_task(self._send(key, state, batch))
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)
        if state.in_flight == 0 and not state.waiting:
            self._keys.pop(key, None)

    async def _send(
        self,
        key: KeyT,
        state: _Key[CallT, AnswerT],
        batch: list[tuple[CallT, asyncio.Future[AnswerT]]],
    ) -> None:
        try:
            await self._send_batch(batch)
        finally:
            state.in_flight -= 1
            self._next(key, state)

    async def _send_batch(self, batch: list[tuple[CallT, asyncio.Future[AnswerT]]]) -> None:
        calls = [call for call, _ in batch]
        self._statements.sent(len(calls))
        try:
            if len(calls) == 1:
                answers: Sequence[AnswerT | BaseException] = [await self._alone(calls[0])]
            else:
                answers = await self._statements.together(calls)
        except Exception as exc:
            if is_connection_error(exc):
                # Every caller sees the lost link and retries (a retry finds what committed).
                for _, answer in batch:
                    _settle(answer, exc)
                return
            # Not the link: some call failed the whole statement. Each goes again alone, so
            # one call's error is its own and the others are answered.
            await asyncio.gather(*(self._settle_alone(call, answer) for call, answer in batch))
            return
        except BaseException:
            for _, answer in batch:
                answer.cancel()
            raise
        for (_, answer), outcome in zip(batch, answers, strict=True):
            _settle(answer, outcome)

    async def _alone(self, call: CallT) -> AnswerT | BaseException:
        try:
            return await self._statements.alone(call)
        except Exception as exc:  # the caller's own error, raised where it awaits
            if is_connection_error(exc):
                raise
            return exc

    async def _settle_alone(self, call: CallT, answer: asyncio.Future[AnswerT]) -> None:
        self._statements.sent(1)
        try:
            outcome = await self._alone(call)
        except Exception as exc:
            outcome = exc
        _settle(answer, outcome)


def in_call_order(count: int, answered: Iterable[tuple[int, AnswerT]]) -> list[AnswerT]:
    """A batch statement's answers by ordinal (1-based, one each) as a list in call order."""
    answers: list[AnswerT | None] = [None] * count
    for ordinal, answer in answered:
        answers[ordinal - 1] = answer
    # The statement answers every call of the batch exactly once.
    assert all(answer is not None for answer in answers)
    return [answer for answer in answers if answer is not None]


def _settle(answer: asyncio.Future[AnswerT], outcome: AnswerT | BaseException) -> None:
    if answer.done():  # its caller went away meanwhile
        return
    if isinstance(outcome, BaseException):
        answer.set_exception(outcome)
    else:
        answer.set_result(outcome)
