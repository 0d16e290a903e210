"""Cooperative cancellation of workflow runs: no dispatch after the signal."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from runtime.execution import ExecutionSettings, WorkflowRuntime, close_waiter, wait_for_result
from runtime.invocation.waiting import cancel_run, cancelled_by_caller
from runtime.security import Keyring
from runtime.security.keyring import new_keyring_document
from runtime.store import Database
from tests.support.execution import LOCAL_BACKENDS, Receive, Send, document, executor, serving
from tests.support.execution_runs import start
from tests.support.scheduler import cancel_signalled
from tests.support.waiting import wait_until


@dataclass
class HookedServer:
    """Runs `on_first` while the first request is in flight, then answers every request."""

    on_first: Callable[[], Awaitable[None]] | None = None
    requests: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        """The server's origin."""
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        self.requests.append(scope["path"])
        if len(self.requests) == 1 and self.on_first is not None:
            await self.on_first()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


@pytest.fixture
async def keyring(db: Database) -> AsyncIterator[Keyring]:
    yield Keyring.from_document(new_keyring_document("k1"))
    await close_waiter(db)


def _two_writes(base: str) -> dict[str, Any]:
    # Both calls sit in one top-level task, so only the dispatch check can stop the second.
    first = {"call": "http", "with": {"method": "post", "endpoint": f"{base}/first"}}
    second = {"call": "http", "with": {"method": "post", "endpoint": f"{base}/second"}}
    return document([{"both": {"do": [{"first": first}, {"second": second}]}}])


async def _terminal(db: Database, host: str, pid: str) -> dict[str, Any]:
    run = await wait_for_result(db, host, pid, timeout=20)
    assert run is not None and run.state in ("COMPLETED", "FAILED", "CANCELLED"), run
    return run


async def test_a_cooperative_run_cancelled_mid_call_sends_nothing_more_and_ends_cancelled(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    run_ids: list[str] = []
    known = asyncio.Event()
    outcomes: list[str] = []

    async def cancel_now() -> None:
        await known.wait()
        outcomes.append(await cancel_run(db, host, run_ids[0], cancelled_by_caller()))

    async with serving(HookedServer(on_first=cancel_now)) as server:  # type: ignore[arg-type]
        settings = ExecutionSettings(http_allowlist=[server.base])
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(
                db, keyring, _two_writes(server.base), {}, host_id=host,
                cancellation_policy="cooperative",
            )  # fmt: skip
            run_ids.append(pid)
            known.set()
            run = await _terminal(db, host, pid)
    assert outcomes == ["cancellationRequested"]
    assert run.state == "CANCELLED" and run.error["code"] == "WORKFLOW_CANCELLED"
    assert run.error["afterEffect"] is True
    assert server.requests == ["/first"]


async def test_the_deadline_sweep_stops_a_cooperative_run_before_its_next_dispatch(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    run_ids: list[str] = []
    known = asyncio.Event()

    async def hold_until_the_sweep_signals() -> None:
        # The first write stays in flight until the deadline sweep has raised the signal.
        await known.wait()
        await wait_until(
            lambda: cancel_signalled(db, host, run_ids[0]), what="the deadline sweep's signal"
        )

    hooked = HookedServer(on_first=hold_until_the_sweep_signals)
    async with serving(hooked) as server:  # type: ignore[arg-type]
        settings = ExecutionSettings(http_allowlist=[server.base])
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(
                db, keyring, _two_writes(server.base), {}, host_id=host,
                cancellation_policy="cooperative", timeout_ms=700,
            )  # fmt: skip
            run_ids.append(pid)
            known.set()
            run = await _terminal(db, host, pid)
    # Honoured past the deadline, the signal ends the run as the deadline's end.
    assert run.state == "CANCELLED" and run.error["code"] == "WORKFLOW_TIMEOUT"
    assert server.requests == ["/first"]
