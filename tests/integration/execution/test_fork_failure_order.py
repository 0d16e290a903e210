"""Deterministic parallel failure: a fork reports its lowest-indexed failing branch.

Two branches call a stub backend that holds both requests until both are in flight, answers
one branch's at once and the other's only once the engine has seen the first failure (the
held request is answered after a pause in which a cancelled client would have disconnected).
Whichever order the failures come in, the run reports branch 0's error, and its status lists
every branch's outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from runtime.execution import ExecutionSettings, WorkflowRuntime, close_waiter, wait_for_result
from runtime.scheduler.inspection import show_run
from runtime.security import Keyring
from runtime.security.keyring import new_keyring_document
from runtime.store import Database
from tests.support.execution import LOCAL_BACKENDS, Receive, Send, document, executor, serving
from tests.support.execution_runs import start

# Long enough for a cancelled client's disconnect to reach the stub before it answers late.
SETTLE_S = 0.5
STATUS = {"/b0": 502, "/b1": 500}


@dataclass
class OrderedFailures:
    """Holds /b0 and /b1 until both arrived; fails `early` at once and the other one late.

    The late request is answered once a cancelled client would have gone away, or, when
    `late_cancelled` says the engine must cancel it, only ever awaits that disconnect.
    """

    early: str
    late_cancelled: bool = False
    port: int = 0
    arrived: dict[str, asyncio.Event] = field(
        default_factory=lambda: {path: asyncio.Event() for path in STATUS}
    )
    answered_early: asyncio.Event = field(default_factory=asyncio.Event)
    disconnected: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        """The server's origin."""
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        path = scope["path"]
        self.arrived[path].set()
        for event in self.arrived.values():
            await event.wait()
        if path != self.early:
            await self.answered_early.wait()
            with contextlib.suppress(TimeoutError):
                # A client the engine cancelled goes away here; a waited-for one stays.
                wait_s = None if self.late_cancelled else SETTLE_S
                message = await asyncio.wait_for(receive(), wait_s)
                if message["type"] == "http.disconnect":
                    self.disconnected.append(path)
                    return
        await send({"type": "http.response.start", "status": STATUS[path], "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
        if path == self.early:
            self.answered_early.set()


@pytest.fixture
async def keyring(db: Database) -> AsyncIterator[Keyring]:
    yield Keyring.from_document(new_keyring_document("k1"))
    await close_waiter(db)


def _fork(base: str, *, compete: bool = False, methods: tuple[str, str] = ("get", "get")) -> Any:
    branches = [
        {f"b{i}": {"call": "http", "with": {"method": method, "endpoint": f"{base}/b{i}"}}}
        for i, method in enumerate(methods)
    ]
    fork: dict[str, Any] = {"branches": branches}
    if compete:
        fork["compete"] = True
    return document([{"both": {"fork": fork}}])


async def _failed_run(
    db: Database, keyring: Keyring, early: str, compete: bool, **fork: Any
) -> Any:
    host = str(uuid.uuid4())
    # Only a fork of all branches whose branch 0 fails first cancels the other branch.
    late_cancelled = not compete and early == "/b0"
    async with serving(OrderedFailures(early, late_cancelled)) as server:
        settings = ExecutionSettings(http_allowlist=[server.base])
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            doc = _fork(server.base, compete=compete, **fork)
            pid = await start(db, keyring, doc, {}, host_id=host)
            run = await wait_for_result(db, host, pid, timeout=20)
            shown = await show_run(db, host, pid)
    assert run is not None and run.state == "FAILED", run
    return run, server, shown


BRANCH_0 = "/do/0/both/fork/branches/0/b0"


@pytest.mark.requirement("001:Phase 2 exit gates")
@pytest.mark.parametrize("early", ["/b1", "/b0"])
async def test_a_fork_reports_its_lowest_indexed_failing_branch_whatever_fails_first(
    db: Database, keyring: Keyring, early: str
) -> None:
    run, server, _ = await _failed_run(db, keyring, early, compete=False)
    details = run.error["details"]
    assert run.error["code"] == "WORKFLOW_TASK_FAILED"
    assert (details["instance"], details["status"]) == (BRANCH_0, 502)
    [fork] = details["forks"]
    assert fork["task"] == "/do/0/both"
    b0, b1 = fork["branches"]
    assert b0 == {
        "name": "b0",
        "outcome": "failed",
        "error": {"type": details["type"], "status": 502, "instance": BRANCH_0},
    }
    if early == "/b1":
        # Branch 1 failed first, yet branch 0 was waited for: its failure is the one reported.
        assert server.disconnected == []
        assert b1["outcome"] == "failed" and b1["error"]["status"] == 500
    else:
        # Branch 0 failed first: branch 1 could not change the answer, so it was cancelled.
        assert server.disconnected == ["/b1"]
        assert b1 == {"name": "b1", "outcome": "cancelled"}


@pytest.mark.requirement("001:Phase 2 exit gates")
@pytest.mark.parametrize("early", ["/b1", "/b0"])
async def test_a_compete_fork_whose_branches_all_fail_reports_the_lowest_indexed_one(
    db: Database, keyring: Keyring, early: str
) -> None:
    run, server, _ = await _failed_run(db, keyring, early, compete=True)
    details = run.error["details"]
    assert (details["instance"], details["status"]) == (BRANCH_0, 502)
    assert server.disconnected == []
    outcomes = [(b["name"], b["outcome"]) for b in details["forks"][0]["branches"]]
    assert outcomes == [("b0", "failed"), ("b1", "failed")]


@pytest.mark.requirement("001:Phase 2 exit gates")
async def test_a_write_in_flight_in_a_cancelled_sibling_stays_recorded_as_possible(
    db: Database, keyring: Keyring
) -> None:
    # Branch 0 fails while branch 1's POST is at the backend: branch 1 is cancelled, and its
    # write, marked possible before it was sent, is reported as possible: never as none (it
    # may have happened) and never as confirmed (nobody saw it answered).
    run, server, shown = await _failed_run(db, keyring, "/b0", False, methods=("get", "post"))
    assert server.disconnected == ["/b1"]
    assert run.error["details"]["instance"] == BRANCH_0
    assert run.effect_state == "possible" and run.error["afterEffect"] is True
    assert [step["effect_state"] for step in shown["effects"]] == ["possible"]
    outcomes = [b["outcome"] for b in run.error["details"]["forks"][0]["branches"]]
    assert outcomes == ["failed", "cancelled"]
