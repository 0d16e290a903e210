"""The one-statement admission (migration 0025) raced against the owner's publication moves.

Most tests hold the Tool's admission lock (the advisory lock admission takes last) from a
superuser session, so admissions pile up holding the version and head share locks; a revoke,
republish or retire started then must wait for them, and every admission must answer with a
typed result once the lock is let go. Other callers keep calling throughout, each recording
when it started, so a call started after a receipt must see the new head.

Every call here has an admission statement of its own (the subject is the database's locks);
test_mcp_invoke_admission_batches.py races batches of one Tool's calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from runtime.admission import CapacitySettings
from runtime.collaborators import Services
from runtime.invocation import store
from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import HOST, binding, new_id, publish_args
from tests.support.invocation import (
    Tool,
    client,
    invoke_args,
    ok,
    publish_tool,
    refused,
    revoke_args,
)
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until

PLENTY = 1_000
OPEN = {
    "maximumConcurrentRuns": PLENTY,
    "maximumConcurrentRunsPerUser": PLENTY,
    "startsPerMinute": PLENTY,
    "startsPerMinutePerUser": PLENTY,
}
PILED = 6
LOOPERS = 4
# Typed answers a racing call may get: admitted (a live run without an executor) or refused.
ADMITTED = "WORKFLOW_TIMEOUT"

Admin = psycopg.AsyncConnection[dict[str, Any]]


@pytest.fixture(autouse=True)
def statement_per_call(services: Services) -> None:
    """As many admission statements in flight per Tool as any test here makes calls."""
    services.admission.configure(CapacitySettings(admission_statements_per_tool=64))


@pytest.fixture
async def admin(database_url: str) -> AsyncIterator[Admin]:
    """A superuser session on the test database (autocommit)."""
    conn = await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    )
    try:
        yield conn
    finally:
        await conn.close()


def _lock_key(tool: Tool) -> str:
    return f"workflow-tool-admission:{HOST}:{tool.tool_id}"


@asynccontextmanager
async def admission_lock_held(admin: Admin, tool: Tool) -> AsyncIterator[None]:
    """Hold the Tool's admission lock (session level) so admissions queue behind it."""
    await admin.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (_lock_key(tool),))
    try:
        yield
    finally:
        await admin.execute(
            "SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (_lock_key(tool),)
        )


async def until(
    admin: Admin,
    query: str,
    expected: int,
    *,
    within_s: float = 20.0,
    unless: asyncio.Task[Any] | None = None,
) -> None:
    """Wait until a count query answers at least `expected` (or the task `unless` ended)."""
    async with asyncio.timeout(within_s):
        while unless is None or not unless.done():
            row = await (await admin.execute(query)).fetchone()
            assert row is not None
            if int(row["n"]) >= expected:
                return
            await asyncio.sleep(0.02)


ADVISORY_WAITERS = "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
# A publication move waiting for the admissions' share locks on a row.
ROW_WAITERS = (
    "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    " AND wait_event IN ('transactionid', 'tuple')"
)


async def runs_of(admin: Admin, tool: Tool) -> list[dict[str, Any]]:
    """The Tool's admitted runs (owner records), oldest first."""
    cursor = await admin.execute(
        "SELECT process_id::text AS process_id, binding_id::text AS binding_id, created_ts"
        " FROM workflow_invocation_t WHERE tool_id = %s ORDER BY created_ts",
        (tool.tool_id,),
    )
    return await cursor.fetchall()


def _calls_since(looper: Looper, instant: float) -> int:
    """How many of the looper's calls started after instant and have been answered."""
    return sum(1 for (start, _, _) in looper.calls if start > instant)


def code_of(result: dict[str, Any]) -> str:
    """The error code of a call (every racing call is answered isError without an executor)."""
    assert result["isError"] is True, result
    return str(result["structuredContent"]["error"]["code"])


@dataclasses.dataclass
class Looper:
    """Calls a Tool in a loop until told to stop, recording (start, end, result) of each call."""

    caller: McpTestClient
    args: Callable[[int], dict[str, Any]]
    calls: list[tuple[float, float, dict[str, Any]]] = dataclasses.field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        n = 0
        while not stop.is_set():
            started = time.monotonic()
            result = await self.caller.call_tool("workflow_invoke", self.args(n))
            self.calls.append((started, time.monotonic(), result))
            n += 1
            await asyncio.sleep(0)


async def race_a_move(
    admin: Admin,
    tool: Tool,
    callers: list[McpTestClient],
    args: Callable[[str, int], dict[str, Any]],
    move: Callable[[], Awaitable[dict[str, Any]]],
) -> tuple[list[dict[str, Any]], list[Looper], float, int]:
    """Pile admissions on the held lock, start the move, let go; loopers call throughout.

    Returns the piled calls' results, the loopers, the instant the move's receipt arrived and
    the number of runs stored right then.
    """
    stop = asyncio.Event()
    loopers = [
        Looper(callers[n % len(callers)], lambda k, n=n: args(f"loop-{n}", k))
        for n in range(LOOPERS)
    ]
    async with asyncio.timeout(60):
        looping = [asyncio.create_task(looper.run(stop)) for looper in loopers]
        async with admission_lock_held(admin, tool):
            piled = [
                asyncio.create_task(
                    callers[n % len(callers)].call_tool("workflow_invoke", args("piled", n))
                )
                for n in range(PILED)
            ]
            await until(admin, ADVISORY_WAITERS, PILED)
            moving = asyncio.create_task(move())
            # The move waits for the piled admissions' share locks (seed 000 "Concurrency").
            await until(admin, ROW_WAITERS, 1, unless=moving)
            # A deliberate window, the thing under test: the move must still be waiting after
            # it (the locks it waits for are held until the admission lock is let go).
            await asyncio.sleep(0.2)
            assert not moving.done(), "the move did not wait for the admissions in flight"
        receipt = await moving
        received = time.monotonic()
        stored = len(await runs_of(admin, tool))
        ok(receipt)
        # Let every looper make at least two calls after the receipt.
        await wait_until(
            lambda: all(_calls_since(looper, received) >= 2 for looper in loopers),
            what="two calls of every looper after the receipt",
            within_s=20,
        )
        stop.set()
        await asyncio.gather(*looping)
        results = await asyncio.gather(*piled)
    return list(results), loopers, received, stored


def _callers(http: httpx.AsyncClient, identity: DevIdentity) -> list[McpTestClient]:
    return [client(http, identity, f"racer-{n}") for n in range(4)]


def _numbered(tool: Tool) -> Callable[[str, int], dict[str, Any]]:
    return lambda prefix, n: invoke_args(tool, {"claimId": f"{prefix}-{n}"})


@pytest.mark.requirement("000:Concurrency")
async def test_a_revoke_waits_for_admissions_in_flight_and_no_run_is_admitted_after_it(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, admin: Admin
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    revoke = revoke_args(tool)
    piled, loopers, received, stored = await race_a_move(
        admin,
        tool,
        _callers(wide, dev_identity),
        _numbered(tool),
        lambda: owner.call_tool("workflow_binding_revoke", revoke),
    )
    # The piled admissions held the head when the revoke came: each was admitted before it.
    assert [code_of(result) for result in piled] == [ADMITTED] * PILED
    runs = await runs_of(admin, tool)
    assert len(runs) == stored, "a run was admitted after the revoke's receipt"
    assert {run["binding_id"] for run in runs} == {tool.binding_id}
    after = [
        result for looper in loopers for (start, _, result) in looper.calls if start > received
    ]
    assert len(after) >= LOOPERS
    for result in after:
        body = refused(result, "WORKFLOW_POLICY_DENIED")
        assert body["error"]["message"] == "binding revoked by workflow owner"
    for looper in loopers:
        for _, _, result in looper.calls:
            assert code_of(result) in (ADMITTED, "WORKFLOW_POLICY_DENIED"), result


@pytest.mark.requirement("000:Binding revisions")
async def test_a_republish_waits_for_admissions_in_flight_and_old_digests_then_mismatch(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, admin: Admin
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    changed = binding(tool.wf_def_id, tool.tool_id, tool.text, syncWaitMs=60, admissionLimits=OPEN)
    publish = publish_args(changed, tool.aggregate_version)
    piled, loopers, received, stored = await race_a_move(
        admin,
        tool,
        _callers(wide, dev_identity),
        _numbered(tool),
        lambda: owner.call_tool("workflow_binding_publish", publish),
    )
    assert [code_of(result) for result in piled] == [ADMITTED] * PILED
    runs = await runs_of(admin, tool)
    assert len(runs) == stored, "a run pinned to the superseded revision came after the receipt"
    assert {run["binding_id"] for run in runs} == {tool.binding_id}
    after = [
        result for looper in loopers for (start, _, result) in looper.calls if start > received
    ]
    assert len(after) >= LOOPERS
    for result in after:
        refused(result, "WORKFLOW_DEFINITION_MISMATCH")
    # The same process (its revision cache still held the old revision) admits the new digests.
    head = ok(
        await owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool.tool_id})
    )
    new_binding = head["activeBindingId"]
    assert new_binding != tool.binding_id
    fresh = dataclasses.replace(
        tool, binding_id=new_binding, binding_digest=head["revision"]["bindingDigest"]
    )
    callers = _callers(wide, dev_identity)
    async with asyncio.timeout(30):
        results = await asyncio.gather(
            *(
                callers[n % len(callers)].call_tool(
                    "workflow_invoke", invoke_args(fresh, {"claimId": f"new-{n}"})
                )
                for n in range(PILED)
            )
        )
    assert [code_of(result) for result in results] == [ADMITTED] * PILED
    newer = (await runs_of(admin, tool))[stored:]
    assert len(newer) == PILED and {run["binding_id"] for run in newer} == {new_binding}


@pytest.mark.requirement("000:Status rules")
async def test_a_binding_retire_then_definition_retire_race_admissions_without_deadlock(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, admin: Admin
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    retire = {
        "hostId": HOST,
        "toolId": tool.tool_id,
        "expectedAggregateVersion": tool.aggregate_version,
        "operationId": new_id(),
    }
    callers = _callers(wide, dev_identity)
    piled, loopers, received, stored = await race_a_move(
        admin,
        tool,
        callers,
        _numbered(tool),
        lambda: owner.call_tool("workflow_binding_retire", retire),
    )
    assert [code_of(result) for result in piled] == [ADMITTED] * PILED
    # Then the version, while admissions keep coming.
    stop = asyncio.Event()
    more = [
        Looper(callers[n], lambda k, n=n: invoke_args(tool, {"claimId": f"v-{n}-{k}"}))
        for n in range(LOOPERS)
    ]
    version_retire = {
        "hostId": HOST,
        "wfDefId": tool.wf_def_id,
        "version": "1.2.0",
        "operationId": new_id(),
    }
    async with asyncio.timeout(30):
        looping = [asyncio.create_task(looper.run(stop)) for looper in more]
        await wait_until(
            lambda: all(looper.calls for looper in more), what="a call of every looper"
        )
        ok(await owner.call_tool("workflow_definition_retire", version_retire))
        retired_at = time.monotonic()
        await wait_until(
            lambda: all(_calls_since(looper, retired_at) >= 2 for looper in more),
            what="two calls of every looper after the retire",
            within_s=20,
        )
        stop.set()
        await asyncio.gather(*looping)
    runs = await runs_of(admin, tool)
    assert len(runs) == stored, "a run was admitted after the retire's receipt"
    assert {run["binding_id"] for run in runs} == {tool.binding_id}
    answered = [
        result
        for looper in loopers + more
        for (start, _, result) in looper.calls
        if start > received
    ]
    assert len(answered) >= 2 * LOOPERS
    for result in answered:
        body = refused(result, "WORKFLOW_POLICY_DENIED")
        assert body["error"]["message"] == "the Tool has no active owner-approved binding revision"
    assert any(start > retired_at for looper in more for (start, _, _) in looper.calls)


TRANSACTION_WAITERS = (
    "SELECT count(*) AS n FROM pg_stat_activity"
    " WHERE wait_event_type = 'Lock' AND wait_event = 'transactionid'"
)


@pytest.mark.requirement("000:Idempotency")
async def test_identical_racing_calls_attach_to_one_run_and_none_spends_the_last_slot(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, admin: Admin
) -> None:
    """Seed 000 lets a loser get WORKFLOW_CAPACITY_EXHAUSTED when both miss the attach check;
    in the one statement the loser waits on the winner's reservation and always attaches."""
    cap = 3
    full = dict(OPEN, maximumConcurrentRuns=cap, maximumConcurrentRunsPerUser=cap)
    tool = await publish_tool(
        owner,
        syncWaitMs=50,
        admissionLimits=full,
        idempotencyPolicy={"kind": "derived", "resultReplayMs": 0},
    )
    caller = client(wide, dev_identity, "same-user")
    for n in range(cap - 1):
        refused(
            await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": n})), ADMITTED
        )
    same = invoke_args(tool, {"claimId": "the-same"})
    racers = 8
    async with asyncio.timeout(60):
        # Held: the winner waits on the admission lock with its reservation written, the
        # others wait on that reservation.
        async with admission_lock_held(admin, tool):
            calls = [
                asyncio.create_task(caller.call_tool("workflow_invoke", same))
                for _ in range(racers)
            ]
            await until(admin, ADVISORY_WAITERS, 1)
            await until(admin, TRANSACTION_WAITERS, racers - 1)
        held = await asyncio.gather(*calls)
        # Then free-running: every call after the first attaches as well.
        free = await asyncio.gather(
            *(caller.call_tool("workflow_invoke", same) for _ in range(racers))
        )
    bodies = [refused(result, ADMITTED) for result in held + free]
    instances = {body["workflowInstanceId"] for body in bodies}
    assert len(instances) == 1, instances
    runs = await runs_of(admin, tool)
    assert len(runs) == cap
    assert runs[-1]["process_id"] == instances.pop()


def _bucketed(tool: Tool) -> str:
    return (
        "DELETE FROM workflow_tool_start_count_t WHERE tool_id = %(tool)s;"
        " INSERT INTO workflow_tool_start_count_t"
        " (host_id, tool_id, per_user, end_user_subject, second, starts)"
        " SELECT i.host_id, i.tool_id, scope.per_user, scope.subject,"
        "        floor(extract(epoch FROM i.created_ts))::bigint, count(*)"
        " FROM workflow_invocation_t i"
        " CROSS JOIN LATERAL (VALUES (false, ''), (true, i.end_user_subject))"
        "   AS scope(per_user, subject)"
        " WHERE i.tool_id = %(tool)s GROUP BY 1, 2, 3, 4, 5"
    )


async def _backdate(admin: Admin, tool: Tool, process_ids: list[str], sql_ts: str) -> None:
    """Move runs' starts to the instant sql_ts, and rebuild the Tool's per-second counts."""
    async with admin.transaction():
        await admin.execute(
            f"UPDATE workflow_invocation_t SET created_ts = {sql_ts}"
            " WHERE process_id = ANY(%(ids)s::uuid[])",
            {"ids": process_ids},
        )
        for statement in _bucketed(tool).split(";"):
            await admin.execute(statement, {"tool": tool.tool_id})


@pytest.mark.requirement("000:Concurrency and rate limits")
async def test_the_minute_window_counts_its_first_second_exactly(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, admin: Admin
) -> None:
    """L starts in the window's first second but older than a minute, L - 1 inside: the buckets
    say full (2L - 1), the exact first second says room, so one more start is admitted, and the
    next is refused."""
    per_minute = 3
    tool = await publish_tool(
        owner,
        syncWaitMs=50,
        admissionLimits=dict(OPEN, startsPerMinute=per_minute, startsPerMinutePerUser=per_minute),
    )
    caller = client(wide, dev_identity, "windowed")
    # Other users' starts, so only the Tool-wide window is near its limit for this caller.
    others = [client(wide, dev_identity, f"other-{n}") for n in range(per_minute)]
    serial = iter(range(10_000))

    async def start(who: McpTestClient) -> dict[str, Any]:
        args = invoke_args(tool, {"claimId": f"w-{next(serial)}"})
        return await who.call_tool("workflow_invoke", args)

    async def started(who: McpTestClient) -> str:
        return str(refused(await start(who), ADMITTED)["workflowInstanceId"])

    exercised = False
    async with asyncio.timeout(90):
        for _ in range(4):
            old = [await started(other) for other in others]
            # Fill the minute then move these starts out of it (or the next ones are refused).
            await _backdate(admin, tool, old, "now() - interval '10 minutes'")
            inside = [await started(other) for other in others[: per_minute - 1]]
            await _backdate(admin, tool, inside, "now() - interval '30 seconds'")
            # Early in a second, so the call counts within it: the old starts go to its first
            # second minus a minute, 10 ms in, before the window starts.
            while not 0.05 <= time.time() % 1 <= 0.3:
                await asyncio.sleep(0.01)
            second = int(time.time())
            await _backdate(admin, tool, old, f"to_timestamp({second - 60}.01)")
            buckets = await (
                await admin.execute(
                    "SELECT sum(starts) AS n FROM workflow_tool_start_count_t"
                    " WHERE tool_id = %s AND NOT per_user AND second >= %s",
                    (tool.tool_id, second - 60),
                )
            ).fetchone()
            assert buckets is not None and int(buckets["n"]) == 2 * per_minute - 1
            result = await start(caller)
            body = refused(result, ADMITTED)  # room: only L - 1 starts are inside the minute
            row = await (
                await admin.execute(
                    "SELECT floor(extract(epoch FROM created_ts))::bigint AS s"
                    " FROM workflow_invocation_t WHERE process_id = %s",
                    (body["workflowInstanceId"],),
                )
            ).fetchone()
            assert row is not None
            # Now L starts are inside the minute: the next start is refused, exactly.
            full = refused(await start(caller), "WORKFLOW_CAPACITY_EXHAUSTED")
            assert full["error"]["retryAfterMs"] > 0
            if int(row["s"]) == second:
                exercised = True
                break
            # Counted in a later second: the old starts had left the buckets; try again.
            await _backdate(
                admin, tool, [body["workflowInstanceId"], *inside], "now() - interval '10 minutes'"
            )
    assert exercised, "the admission never counted in the second the old starts were put in"


@pytest.mark.requirement("000:Admission")
async def test_an_answer_lost_after_the_admission_committed_attaches_on_the_retry(
    owner: McpTestClient,
    wide: httpx.AsyncClient,
    dev_identity: DevIdentity,
    admin: Admin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    caller = client(wide, dev_identity, "dropped")
    real = store.admit_invoke
    answers: list[store.AdmitOutcome] = []

    async def lossy(
        conn: Any, params: store.AdmitParams, *, exclusive: bool = False
    ) -> store.AdmitOutcome:
        outcome = await real(conn, params, exclusive=exclusive)
        answers.append(outcome)
        if len(answers) == 1:
            # Committed (autocommit), then the link went before the answer was read.
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return outcome

    monkeypatch.setattr(store, "admit_invoke", lossy)
    async with asyncio.timeout(30):
        body = refused(await caller.call_tool("workflow_invoke", invoke_args(tool)), ADMITTED)
    assert [answer.outcome for answer in answers] == ["accepted", "attach"]
    assert {answer.process_id for answer in answers} == {body["workflowInstanceId"]}
    runs = await runs_of(admin, tool)
    assert [run["process_id"] for run in runs] == [body["workflowInstanceId"]]


@pytest.mark.requirement("000:Admission")
async def test_a_backend_terminated_during_admission_is_retried_and_admits_once(
    owner: McpTestClient, wide: httpx.AsyncClient, dev_identity: DevIdentity, admin: Admin
) -> None:
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    caller = client(wide, dev_identity, "terminated")
    waiting = "SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted"
    async with asyncio.timeout(40):
        async with admission_lock_held(admin, tool):
            call = asyncio.create_task(caller.call_tool("workflow_invoke", invoke_args(tool)))
            await until(admin, ADVISORY_WAITERS, 1)
            (first,) = await (await admin.execute(waiting)).fetchall()
            await admin.execute("SELECT pg_terminate_backend(%s)", (first["pid"],))
            # The retry queues on the same lock from another backend; its run is the only one.
            await until(
                admin,
                "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                f" AND pid <> {int(first['pid'])}",
                1,
                unless=call,
            )
        body = refused(await call, ADMITTED)
    runs = await runs_of(admin, tool)
    assert [run["process_id"] for run in runs] == [body["workflowInstanceId"]]


@pytest.mark.requirement("000:Admission")
async def test_an_answer_lost_after_a_run_that_already_ended_returns_that_run_on_the_retry(
    owner: McpTestClient,
    wide: httpx.AsyncClient,
    dev_identity: DevIdentity,
    admin: Admin,
    monkeypatch: pytest.MonkeyPatch,
    workers: object,
) -> None:
    """With resultReplayMs 0 an ended run holds no replay: the retry of the call that admitted
    it must still answer with that run, not admit it again."""
    tool = await publish_tool(owner, admissionLimits=OPEN)
    caller = client(wide, dev_identity, "dropped-late")
    real = store.admit_invoke
    answers: list[store.AdmitOutcome] = []

    async def lossy(
        conn: Any, params: store.AdmitParams, *, exclusive: bool = False
    ) -> store.AdmitOutcome:
        outcome = await real(conn, params, exclusive=exclusive)
        answers.append(outcome)
        if len(answers) == 1:
            # The run ends before the retry comes (a reconnect can take longer than a run).
            await until(
                admin,
                "SELECT count(*) AS n FROM workflow_process WHERE process_id ="
                f" '{outcome.process_id}' AND state NOT IN ('ACCEPTED', 'RUNNING', 'WAITING')",
                1,
            )
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return outcome

    monkeypatch.setattr(store, "admit_invoke", lossy)
    async with asyncio.timeout(30):
        result = await caller.call_tool("workflow_invoke", invoke_args(tool))
    body = ok(result)
    assert answers[0].outcome == "accepted"
    assert {answer.process_id for answer in answers} == {body["workflowInstanceId"]}
    runs = await runs_of(admin, tool)
    assert [run["process_id"] for run in runs] == [body["workflowInstanceId"]]


@pytest.mark.requirement("000:Admission")
async def test_an_answer_lost_before_a_revoke_still_returns_the_run_it_admitted(
    owner: McpTestClient,
    wide: httpx.AsyncClient,
    dev_identity: DevIdentity,
    admin: Admin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first try committed, the owner revoked, then the retry: the run admitted before the
    revoke is this call's answer (never a refusal that hides accepted work)."""
    tool = await publish_tool(owner, syncWaitMs=50, admissionLimits=OPEN)
    caller = client(wide, dev_identity, "dropped-revoked")
    real = store.admit_invoke
    answers: list[store.AdmitOutcome] = []
    revoke = revoke_args(tool)

    async def lossy(
        conn: Any, params: store.AdmitParams, *, exclusive: bool = False
    ) -> store.AdmitOutcome:
        outcome = await real(conn, params, exclusive=exclusive)
        answers.append(outcome)
        if len(answers) == 1:
            ok(await owner.call_tool("workflow_binding_revoke", revoke))
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return outcome

    monkeypatch.setattr(store, "admit_invoke", lossy)
    async with asyncio.timeout(30):
        body = refused(await caller.call_tool("workflow_invoke", invoke_args(tool)), ADMITTED)
    assert [answer.outcome for answer in answers] == ["accepted", "attach"]
    runs = await runs_of(admin, tool)
    assert [run["process_id"] for run in runs] == [body["workflowInstanceId"]]
    body = refused(
        await caller.call_tool("workflow_invoke", invoke_args(tool, {"claimId": "after"})),
        "WORKFLOW_POLICY_DENIED",
    )
    assert body["error"]["message"] == "binding revoked by workflow owner"
