"""runtime.store.batches: alone while a key is quiet, together while it is busy, never lost."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import psycopg
import pytest

from runtime.store.batches import BatchStatements, StatementBatcher, in_call_order


class Statements:
    """Statements that wait until let go, recording what each carried."""

    def __init__(self, in_flight: int = 1, batch_max: int = 8) -> None:
        self.sent: list[list[int]] = []
        self.gate = asyncio.Event()
        self.fail_together: BaseException | None = None
        self.fail_alone: dict[int, BaseException] = {}
        self.limit = in_flight
        self.batch_max = batch_max

    async def alone(self, call: int) -> str:
        self.sent.append([call])
        await self.gate.wait()
        if call in self.fail_alone:
            raise self.fail_alone[call]
        return f"answer {call}"

    async def together(self, calls: Sequence[int]) -> Sequence[str | BaseException]:
        self.sent.append(list(calls))
        await self.gate.wait()
        if self.fail_together is not None:
            raise self.fail_together
        return [ValueError(call) if call < 0 else f"answer {call}" for call in calls]

    def batcher(self) -> StatementBatcher[str, int, str]:
        return StatementBatcher(
            BatchStatements(
                alone=self.alone,
                together=self.together,
                batch_max=self.batch_max,
                in_flight=lambda: self.limit,
            )
        )


async def _settled() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_quiet_key_sends_each_call_alone_at_once() -> None:
    statements = Statements(in_flight=2)
    batcher = statements.batcher()
    calls = [asyncio.create_task(batcher.run("tool", n)) for n in (1, 2)]
    await _settled()
    assert statements.sent == [[1], [2]] and batcher.waiting("tool") == 0
    statements.gate.set()
    assert await asyncio.gather(*calls) == ["answer 1", "answer 2"]


async def test_calls_behind_a_busy_statement_go_together_in_batches_of_at_most_the_size() -> None:
    statements = Statements(in_flight=1, batch_max=3)
    batcher = statements.batcher()
    calls = [asyncio.create_task(batcher.run("tool", n)) for n in range(1, 6)]
    await _settled()
    assert statements.sent == [[1]] and batcher.waiting("tool") == 4
    statements.gate.set()
    assert await asyncio.gather(*calls) == [f"answer {n}" for n in range(1, 6)]
    assert statements.sent == [[1], [2, 3, 4], [5]]


async def test_keys_never_share_a_statement() -> None:
    statements = Statements(in_flight=1)
    batcher = statements.batcher()
    calls = [asyncio.create_task(batcher.run(key, n)) for n, key in enumerate("abab")]
    await _settled()
    assert statements.sent == [[0], [1]]
    statements.gate.set()
    await asyncio.gather(*calls)
    assert statements.sent == [[0], [1], [2], [3]]


async def test_each_call_of_a_batch_gets_its_own_answer_or_error() -> None:
    statements = Statements()
    batcher = statements.batcher()
    calls = [asyncio.create_task(batcher.run("tool", n)) for n in (1, 2, -3, 4)]
    await _settled()
    statements.gate.set()
    answers = await asyncio.gather(*calls, return_exceptions=True)
    assert answers[:2] == ["answer 1", "answer 2"] and answers[3] == "answer 4"
    assert isinstance(answers[2], ValueError)


async def test_a_batch_that_fails_goes_again_call_by_call() -> None:
    statements = Statements()
    statements.fail_together = psycopg.errors.DataError("one call is unstorable")
    statements.fail_alone = {3: psycopg.errors.DataError("this one")}
    batcher = statements.batcher()
    calls = [asyncio.create_task(batcher.run("tool", n)) for n in (1, 2, 3, 4)]
    await _settled()
    statements.gate.set()
    answers = await asyncio.gather(*calls, return_exceptions=True)
    assert answers[0] == "answer 1" and answers[1] == "answer 2" and answers[3] == "answer 4"
    assert isinstance(answers[2], psycopg.errors.DataError)
    assert statements.sent == [[1], [2, 3, 4], [2], [3], [4]]


async def test_a_lost_link_reaches_every_caller_of_the_batch() -> None:
    statements = Statements()
    statements.fail_together = psycopg.OperationalError("server closed the connection")
    batcher = statements.batcher()
    calls = [asyncio.create_task(batcher.run("tool", n)) for n in (1, 2, 3)]
    await _settled()
    statements.gate.set()
    answers = await asyncio.gather(*calls, return_exceptions=True)
    assert answers[0] == "answer 1"
    assert all(isinstance(answer, psycopg.OperationalError) for answer in answers[1:])
    assert statements.sent == [[1], [2, 3]]


async def test_a_caller_that_went_away_while_waiting_is_not_sent() -> None:
    statements = Statements()
    batcher = statements.batcher()
    calls = [asyncio.create_task(batcher.run("tool", n)) for n in (1, 2, 3)]
    await _settled()
    calls[1].cancel()
    statements.gate.set()
    assert await calls[0] == "answer 1" and await calls[2] == "answer 3"
    with pytest.raises(asyncio.CancelledError):
        await calls[1]
    assert statements.sent == [[1], [3]]
    assert batcher.waiting("tool") == 0


def test_a_batch_statements_answers_come_back_in_call_order_whatever_order_it_ran_them() -> None:
    assert in_call_order(3, [(2, "b"), (3, "c"), (1, "a")]) == ["a", "b", "c"]
    with pytest.raises(AssertionError):
        in_call_order(3, [(1, "a"), (3, "c")])
