"""A replayed write resumes only from the ledger step recorded for the very same request."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest

from runtime.engine.run import HttpRequest, McpRequest
from runtime.errors import WorkflowError
from runtime.execution import store
from runtime.execution.effects import (
    CALL_SLOTS,
    CallContext,
    DurableEffects,
    http_fingerprint,
    mcp_fingerprint,
)
from runtime.execution.settings import ExecutionSettings
from runtime.execution.targets import policy_for
from runtime.scheduler.lease import TaskLease
from runtime.scheduler.models import ClaimedTask, LeaseState, NewTask, SchedulerSettings
from runtime.scheduler.store import queue
from runtime.security import SecretToken
from runtime.store import Database
from tests.support.scheduler import enqueue

pytestmark = pytest.mark.requirement("001:Idempotency And Side Effects")

BASE = "http://ledger.test"


class CountingTransport(httpx.AsyncBaseTransport):
    """Answers every write with its own body, and counts what was actually sent."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(await request.aread())
        self.sent.append(body)
        answer = json.dumps({"echo": body}).encode()
        # A streamed body, as a real transport returns: the dispatcher reads it in chunks.
        return httpx.Response(200, stream=httpx.ByteStream(answer))


@pytest.fixture
async def claimed(db: Database) -> tuple[ClaimedTask, LeaseState]:
    host = str(uuid.uuid4())
    await enqueue(db, host_id=host, first_task=NewTask("run", {}))
    async with db.transaction() as conn:
        [pair] = await queue.claim_tasks(
            conn, queue.ClaimRequest("worker", 1, 0, 0, 0), SchedulerSettings()
        )
    return pair


@pytest.fixture
async def transport() -> AsyncIterator[CountingTransport]:
    yield CountingTransport()


def write(body: Any) -> HttpRequest:
    return HttpRequest(
        task="write",
        method="POST",
        uri=BASE + "/orders",
        headers={},
        query={},
        body=body,
        redirect=False,
        authentication=None,
        write=True,
    )


async def no_token() -> SecretToken:
    raise AssertionError("HTTP calls need no run token")


def effects(
    db: Database,
    pair: tuple[ClaimedTask, LeaseState],
    transport: CountingTransport,
    prior: dict[int, store.CallStep],
) -> DurableEffects:
    task, state = pair
    settings = ExecutionSettings(http_allowlist=[BASE + "/"])
    return DurableEffects(
        CallContext(
            db=db,
            task=task,
            lease=TaskLease(db, state, None),
            settings=settings,
            policy=policy_for(None, settings.http_allowlist, None),
            client=httpx.AsyncClient(transport=transport),
            user_id="user",
            wf_def_id=None,
            reach=None,
            token=no_token,
            prior_calls=prior,
        )
    )


async def first_run(
    db: Database,
    pair: tuple[ClaimedTask, LeaseState],
    transport: CountingTransport,
    bodies: list[Any],
) -> dict[int, store.CallStep]:
    """Send the writes once, then read back what the step ledger holds for the task."""
    port = effects(db, pair, transport, {})
    for body in bodies:
        await port.call_http(write(body))
    task = pair[0]
    async with db.transaction(read_only=True) as conn:
        return await store.select_call_steps(
            conn, task.host_id, task.process_id, task.step_no, task.step_no + CALL_SLOTS
        )


async def test_each_write_step_records_the_fingerprint_of_its_request(
    db: Database, claimed: tuple[ClaimedTask, LeaseState], transport: CountingTransport
) -> None:
    prior = await first_run(db, claimed, transport, [{"order": "a"}, {"order": "b"}])
    step = claimed[0].step_no
    assert prior[step + 1].request_digest == http_fingerprint(write({"order": "a"}))
    assert prior[step + 2].request_digest == http_fingerprint(write({"order": "b"}))
    assert http_fingerprint(write({"order": "a"})) != http_fingerprint(write({"order": "b"}))


async def test_a_replayed_write_whose_ordinal_holds_another_request_is_refused_not_answered(
    db: Database, claimed: tuple[ClaimedTask, LeaseState], transport: CountingTransport
) -> None:
    prior = await first_run(db, claimed, transport, [{"order": "a"}, {"order": "b"}])
    replay = effects(db, claimed, transport, prior)
    # Fork branches raced differently: b now comes first and gets the ordinal a was sent at.
    with pytest.raises(WorkflowError) as refused:
        await replay.call_http(write({"order": "b"}))
    assert refused.value.code == "WORKFLOW_TASK_FAILED"
    assert transport.sent == [{"order": "a"}, {"order": "b"}]


async def test_a_replayed_write_with_the_recorded_fingerprint_resumes_from_its_own_output(
    db: Database, claimed: tuple[ClaimedTask, LeaseState], transport: CountingTransport
) -> None:
    prior = await first_run(db, claimed, transport, [{"order": "a"}, {"order": "b"}])
    replay = effects(db, claimed, transport, prior)
    first = await replay.call_http(write({"order": "a"}))
    second = await replay.call_http(write({"order": "b"}))
    assert json.loads(first.body) == {"echo": {"order": "a"}}
    assert json.loads(second.body) == {"echo": {"order": "b"}}
    assert transport.sent == [{"order": "a"}, {"order": "b"}]


async def test_a_write_recorded_at_an_ordinal_another_request_took_is_not_sent_again(
    db: Database, claimed: tuple[ClaimedTask, LeaseState], transport: CountingTransport
) -> None:
    prior = await first_run(db, claimed, transport, [{"order": "a"}])
    replay = effects(db, claimed, transport, prior)
    with pytest.raises(WorkflowError):
        await replay.call_http(write({"order": "b"}))
    # a now lands on a fresh ordinal, but the ledger shows it was already sent once.
    with pytest.raises(WorkflowError):
        await replay.call_http(write({"order": "a"}))
    assert transport.sent == [{"order": "a"}]


async def test_identical_writes_resume_their_recorded_count_and_send_only_the_new_one(
    db: Database, claimed: tuple[ClaimedTask, LeaseState], transport: CountingTransport
) -> None:
    prior = await first_run(db, claimed, transport, [{"order": "a"}, {"order": "a"}])
    replay = effects(db, claimed, transport, prior)
    for _ in range(3):
        response = await replay.call_http(write({"order": "a"}))
        assert json.loads(response.body) == {"echo": {"order": "a"}}
    assert transport.sent == [{"order": "a"}] * 3


async def test_a_step_recorded_without_a_fingerprint_resumes_by_ordinal_as_before(
    db: Database, claimed: tuple[ClaimedTask, LeaseState], transport: CountingTransport
) -> None:
    prior = await first_run(db, claimed, transport, [{"order": "a"}])
    prior = {no: msgspec.structs.replace(row, request_digest=None) for no, row in prior.items()}
    replay = effects(db, claimed, transport, prior)
    response = await replay.call_http(write({"order": "b"}))
    assert json.loads(response.body) == {"echo": {"order": "a"}}
    assert transport.sent == [{"order": "a"}]


def tool_call(tool: str, arguments: Any) -> McpRequest:
    return McpRequest("call", "gateway", tool, arguments, "2025-06-18", True)


def test_an_mcp_fingerprint_is_the_tool_and_its_canonical_arguments() -> None:
    same = mcp_fingerprint(tool_call("orders.create", {"a": 1, "b": [1, 2]}))
    assert same == mcp_fingerprint(tool_call("orders.create", {"b": [1, 2], "a": 1.0}))
    assert same != mcp_fingerprint(tool_call("orders.cancel", {"a": 1, "b": [1, 2]}))
    assert same != mcp_fingerprint(tool_call("orders.create", {"a": 2, "b": [1, 2]}))
    # Values outside the canonical profile still fingerprint, and stably.
    assert mcp_fingerprint(tool_call("t", {"x": 1.25})) == mcp_fingerprint(
        tool_call("t", {"x": 1.25})
    )
