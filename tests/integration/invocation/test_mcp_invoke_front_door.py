"""workflow_invoke's front door in front of the app (runtime.composition.front_door), by POST.

A call the door refuses gets its era's tools/call result (isError, WORKFLOW_CAPACITY_EXHAUSTED,
retryAfterMs) at once, with nothing written; every other request passes untouched; a call past
the door keeps its place while its run waits in the queue, and gives it to the next call as
soon as an executor starts the run.

Every test runs twice: over an ASGI transport (FrontDoor reads and judges each call itself),
and over real HTTP served as `workflow-mcp serve` serves it (uvicorn with the protocol that
hands each POST to FrontDoor.answer_on_arrival before any task serves it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar import Litestar

from runtime.admission import CapacitySettings, door
from runtime.collaborators import Services
from runtime.composition.front_door import FrontDoor
from runtime.composition.http_protocol import answering
from runtime.mcp import jsonrpc
from runtime.scheduler.executor import Executor, SlotReservation
from runtime.security.devtools import DevIdentity
from runtime.telemetry import metrics
from tests.support.execution import on_free_port
from tests.support.invocation import (
    HOST,
    client,
    invoke_args,
    ok,
    publish_tool,
    refused,
    running_executor,
)
from tests.support.mcp import LEGACY, MODERN
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("001:Capacity And Availability")


@pytest.fixture(params=["asgi", "served"])
async def doorway(
    app: Litestar, services: Services, request: pytest.FixtureRequest
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the app behind the front door, as `workflow-mcp serve` runs it."""
    services.admission.door.configure(CapacitySettings(door_concurrency=1))
    front = FrontDoor(app, services.admission)
    if request.param == "asgi":
        transport = httpx.ASGITransport(app=front)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield http
        return
    served = on_free_port(front, http=answering(front.answer_on_arrival))
    async with served as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        yield http


async def _runs(services: Services) -> int:
    async with services.database.connection() as conn:
        row = await (await conn.execute("SELECT count(*) AS n FROM workflow_process")).fetchone()
    assert row is not None
    return int(row["n"])


def _waiting(services: Services) -> int:
    return services.admission.door.waiting


async def _crowd(services: Services) -> tuple[door.Pass, asyncio.Task[door.Pass]]:
    """The door full, one call waiting, and a Tool budget it cannot fit."""
    services.admission.estimator.longest_budget = 1.0
    inside = await services.admission.door.enter()
    waiting = asyncio.create_task(services.admission.door.enter())
    await wait_until(lambda: _waiting(services) == 1, what="a call waiting at the door")
    return inside, waiting


async def _clear(crowd: tuple[door.Pass, asyncio.Task[door.Pass]]) -> None:
    inside, waiting = crowd
    inside.leave()
    (await waiting).leave()


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_a_refused_call_gets_its_eras_capacity_result_at_once_with_nothing_written(
    doorway: httpx.AsyncClient, dev_identity: DevIdentity, services: Services, era: str
) -> None:
    owner = client(doorway, dev_identity, "owner-1")
    tool = await publish_tool(owner)
    caller = client(doorway, dev_identity)
    caller.era = era
    crowd = await _crowd(services)
    try:
        before = await _runs(services)
        refusals = _door_refusals()
        # The reply is checked against the era's MCP schema by the test client.
        body = refused(
            await caller.call_tool("workflow_invoke", invoke_args(tool)),
            "WORKFLOW_CAPACITY_EXHAUSTED",
        )
        assert body["error"]["retryable"] is True and body["error"]["retryAfterMs"] > 0
        assert "workflowInstanceId" not in body
        assert await _runs(services) == before
        assert _door_refusals() == refusals + 1
    finally:
        await _clear(crowd)


def _hold_every_slot(executor: Executor) -> list[SlotReservation]:
    """Reserve every free interactive slot of executor, so admitted runs wait in the queue."""
    held = []
    while (slot := executor.reserve("interactive")) is not None:
        held.append(slot)
    return held


def _door_refusals() -> float:
    return metrics.REGISTRY.get_sample_value("workflow_door_refusals_total") or 0.0


async def test_other_requests_pass_a_full_door_untouched(
    doorway: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    owner = client(doorway, dev_identity, "owner-1")
    tool = await publish_tool(owner)
    crowd = await _crowd(services)
    try:
        listed = await owner.request("tools/list", {})
        assert listed.body is not None and "result" in listed.body
        got = ok(
            await owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool.tool_id})
        )
        assert got["toolId"] == tool.tool_id
    finally:
        await _clear(crowd)


async def test_a_queued_run_keeps_its_calls_place_until_an_executor_starts_it(
    doorway: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    owner = client(doorway, dev_identity, "owner-1")
    tool = await publish_tool(owner, syncWaitMs=10_000)
    caller = client(doorway, dev_identity)
    before = await _runs(services)
    async with running_executor(services) as executor:
        # Every interactive slot is taken: the first call's run is admitted into the queue.
        held = _hold_every_slot(executor)
        first = asyncio.create_task(
            caller.call_tool("workflow_invoke", invoke_args(tool, {"n": 1}))
        )

        async def admitted() -> bool:
            return await _runs(services) == before + 1

        await wait_until(admitted, what="the first call's admission")
        assert services.admission.door.inside == 1
        # The door's one place is held by a run that has not started: the next call waits.
        second = asyncio.create_task(
            caller.call_tool("workflow_invoke", invoke_args(tool, {"n": 2}))
        )
        await wait_until(lambda: _waiting(services) == 1, what="the second call waiting")
        assert await _runs(services) == before + 1
        # A slot frees: the executor starts the first run, which frees its place.
        for slot in held:
            slot.release()
        results: list[Any] = await asyncio.gather(first, second)
    for result in results:
        assert ok(result)["status"] == "completed"
    assert services.admission.door.inside == 0 and services.admission.door.waiting == 0


async def test_a_queued_run_frees_its_admission_for_the_next_call_but_keeps_its_place(
    doorway: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    # Two places, one admission at a time: the first call's run waits for a slot, yet the
    # second call is admitted meanwhile; the third waits for a place.
    services.admission.door.configure(CapacitySettings(door_concurrency=2, door_admitting=1))
    owner = client(doorway, dev_identity, "owner-1")
    limits = {
        "maximumConcurrentRuns": 20,
        "maximumConcurrentRunsPerUser": 3,
        "startsPerMinute": 120,
        "startsPerMinutePerUser": 10,
    }
    tool = await publish_tool(owner, syncWaitMs=10_000, admissionLimits=limits)
    caller = client(doorway, dev_identity)
    before = await _runs(services)
    async with running_executor(services) as executor:
        held = _hold_every_slot(executor)

        def call(n: int) -> asyncio.Task[Any]:
            return asyncio.create_task(
                caller.call_tool("workflow_invoke", invoke_args(tool, {"n": n}))
            )

        calls = [call(1), call(2)]

        async def both_admitted() -> bool:
            return await _runs(services) == before + 2

        await wait_until(both_admitted, what="both calls admitted into the queue")
        assert (services.admission.door.inside, services.admission.door.admitting) == (2, 0)
        calls.append(call(3))
        await wait_until(lambda: _waiting(services) == 1, what="the third call waiting")
        assert await _runs(services) == before + 2
        for slot in held:
            slot.release()
        results: list[Any] = await asyncio.gather(*calls)
    for result in results:
        assert ok(result)["status"] == "completed"
    assert (
        services.admission.door.inside,
        services.admission.door.admitting,
        services.admission.door.waiting,
    ) == (0, 0, 0)


async def test_without_an_executor_here_a_call_gives_its_place_back_once_admitted(
    doorway: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    # `serve --no-workers`: other processes run the tasks, so nothing here would free the
    # place of a call whose run waits in the queue.
    owner = client(doorway, dev_identity, "owner-1")
    tool = await publish_tool(owner, syncWaitMs=1500)
    caller = client(doorway, dev_identity)
    before = await _runs(services)
    first = asyncio.create_task(caller.call_tool("workflow_invoke", invoke_args(tool, {"n": 1})))

    async def admitted(count: int) -> bool:
        return await _runs(services) == before + count

    await wait_until(lambda: admitted(1), what="the first call's admission")
    assert services.admission.door.inside == 0 and not first.done()
    # With one place at the door, a second call is admitted while the first still waits.
    second = asyncio.create_task(caller.call_tool("workflow_invoke", invoke_args(tool, {"n": 2})))
    await wait_until(lambda: admitted(2), what="the second call's admission", within_s=1.0)
    for result in await asyncio.gather(first, second):
        refused(result, "WORKFLOW_TIMEOUT")
    assert services.admission.door.inside == 0 and services.admission.door.waiting == 0


async def test_at_shutdown_a_call_waiting_at_the_door_gets_a_retryable_refusal(
    doorway: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    owner = client(doorway, dev_identity, "owner-1")
    tool = await publish_tool(owner)
    caller = client(doorway, dev_identity)
    inside = await services.admission.door.enter()
    try:
        call = asyncio.create_task(caller.call_tool("workflow_invoke", invoke_args(tool)))
        await wait_until(lambda: _waiting(services) == 1, what="the call waiting at the door")
        before = await _runs(services)
        services.admission.door.close()
        body = refused(await call, "WORKFLOW_CAPACITY_EXHAUSTED")
        assert body["error"]["retryable"] is True
        assert await _runs(services) == before
    finally:
        inside.leave()


async def test_an_immediate_retry_of_a_refused_call_waits_its_turn_instead_of_spinning(
    doorway: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    # A standing queue past its target that grows: fresh calls are refused on arrival. The
    # same call sent again at once (an agent ignoring retryAfterMs) waits at the door and is
    # served: refusing it again would only make it spin on the door.
    owner = client(doorway, dev_identity, "owner-1")
    tool = await publish_tool(owner, syncWaitMs=10_000)
    caller = client(doorway, dev_identity)
    services.admission.door.configure(CapacitySettings(door_concurrency=1, door_queue_target_ms=1))
    services.admission.estimator.longest_budget = 60_000.0
    inside = await services.admission.door.enter()
    waiting = asyncio.create_task(services.admission.door.enter())
    await wait_until(lambda: _waiting(services) == 1, what="a call waiting at the door")
    for _ in range(3):  # fresh arrivals outpace the passes: the queue grows
        services.admission.door.judge()
    async with running_executor(services):
        first = refused(
            await caller.call_tool("workflow_invoke", invoke_args(tool, {"n": 1})),
            "WORKFLOW_CAPACITY_EXHAUSTED",
        )
        assert first["error"]["retryAfterMs"] > 0
        retry = asyncio.create_task(
            caller.call_tool("workflow_invoke", invoke_args(tool, {"n": 1}))
        )
        await wait_until(lambda: _waiting(services) == 2, what="the retry waiting at the door")
        other = await caller.call_tool("workflow_invoke", invoke_args(tool, {"n": 2}))
        refused(other, "WORKFLOW_CAPACITY_EXHAUSTED")
        inside.leave()
        (await waiting).leave()
        assert ok(await retry)["status"] == "completed"
    assert services.admission.door.inside == 0 and services.admission.door.waiting == 0


async def test_a_call_is_judged_once_whichever_way_it_came(
    doorway: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Served, the HTTP protocol judges it on arrival and FrontDoor only queues it: judged
    # twice, a call would count twice among the arrivals the door's queue target compares.
    owner = client(doorway, dev_identity, "owner-1")
    tool = await publish_tool(owner)
    caller = client(doorway, dev_identity)
    judged: list[int | None] = []
    judge = services.admission.door.judge

    def counting(now: float | None = None, fingerprint: int | None = None) -> int | None:
        judged.append(fingerprint)
        return judge(now, fingerprint)

    monkeypatch.setattr(services.admission.door, "judge", counting)
    async with running_executor(services):
        result = await caller.call_tool("workflow_invoke", invoke_args(tool))
    assert ok(result)["status"] == "completed"
    assert len(judged) == 1


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_a_calls_body_is_decoded_once_whichever_way_it_came(
    doorway: httpx.AsyncClient,
    dev_identity: DevIdentity,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
    era: str,
) -> None:
    # The door decodes the body to judge the call and hands the decoding to the app: decoded
    # twice, every call would pay the decoder again, the 2026-07-28 form (its params._meta)
    # most of all.
    owner = client(doorway, dev_identity, "owner-1")
    tool = await publish_tool(owner)
    caller = client(doorway, dev_identity)
    caller.era = era
    decoded: list[str] = []
    decode = jsonrpc._DECODER.decode

    def counting(text: str) -> Any:
        decoded.append(text)
        return decode(text)

    # The decoder every decode_body uses, whichever module imported decode_body.
    monkeypatch.setattr(jsonrpc._DECODER, "decode", counting)
    async with running_executor(services):
        result = await caller.call_tool("workflow_invoke", invoke_args(tool))
    assert ok(result)["status"] == "completed"
    assert len([text for text in decoded if '"workflow_invoke"' in text]) == 1


async def _fill(services: Services) -> tuple[list[door.Pass], asyncio.Task[door.Pass]]:
    """Every place of the door taken, one call waiting, and a Tool budget it cannot fit."""
    services.admission.estimator.longest_budget = 1.0
    front = services.admission.door
    held = []
    while front.inside < front.limit:
        held.append(await front.enter())
    waiting = asyncio.create_task(front.enter())
    await wait_until(lambda: _waiting(services) == 1, what="a call waiting at the door")
    return held, waiting


@pytest.mark.requirement("000:Idempotency")
async def test_a_retry_after_a_timeout_re_attaches_to_its_run_through_a_crowded_door(
    doorway: httpx.AsyncClient, dev_identity: DevIdentity, services: Services
) -> None:
    # Issue 40 X-13; seed 000: "The attach check runs before admission, so it skips capacity
    # checks". No executor runs: the first call times out naming its queued run.
    owner = client(doorway, dev_identity, "owner-1")
    tool = await publish_tool(owner, syncWaitMs=100)
    caller = client(doorway, dev_identity)
    first = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_TIMEOUT"
    )
    held, waiting = await _fill(services)
    try:
        retry = refused(
            await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_TIMEOUT"
        )
        assert retry["workflowInstanceId"] == first["workflowInstanceId"]
        # Another call is still refused at the door, before its bearer is verified.
        other = refused(
            await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "C-2"})),
            "WORKFLOW_CAPACITY_EXHAUSTED",
        )
        assert "workflowInstanceId" not in other
    finally:
        for place in held:
            place.leave()
        (await waiting).leave()
