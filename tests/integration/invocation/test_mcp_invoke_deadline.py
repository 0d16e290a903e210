"""workflow_invoke past its deadline: a dispatched write is left to finish and its result kept."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runtime.collaborators import Services
from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.scheduler import Executor
from tests.support.execution import FAST, Receive, Send, read_body, serving
from tests.support.invocation import (
    Tool,
    invoke_args,
    ok,
    publish_local_write_tool,
    publish_tool,
    refused,
)
from tests.support.mcp import McpTestClient
from tests.support.waiting import wait_until


@dataclass
class GatedBackend:
    """A local write endpoint that answers only once the test opens its gate."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    received: int = 0
    port: int = 0

    @property
    def base(self) -> str:
        """The server's origin."""
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        self.received += 1
        await self.gate.wait()
        body = b'{"saved": "claim-7"}'
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def backend() -> AsyncIterator[GatedBackend]:
    server = GatedBackend()
    async with serving(server):  # type: ignore[arg-type]
        try:
            yield server
        finally:
            server.gate.set()


async def _timed_out_past_deadline(caller: McpTestClient, tool: Tool) -> dict[str, Any]:
    """Call until the answer is the final (past-deadline) WORKFLOW_TIMEOUT."""
    body = refused(await caller.call_tool("workflow_invoke", invoke_args(tool)), "WORKFLOW_TIMEOUT")
    # Each call waits min(syncWaitMs, what is left of the deadline): bounded, not timed.
    for _ in range(100):
        if body["error"]["retryable"] is False:
            break
        # Still inside the deadline: the retry re-attaches and waits out the rest.
        again = await caller.call_tool("workflow_invoke", invoke_args(tool))
        assert (
            refused(again, "WORKFLOW_TIMEOUT")["workflowInstanceId"] == body["workflowInstanceId"]
        )
        body = again["structuredContent"]
    return body


async def _state(caller: McpTestClient, instance: str) -> str:
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    return str(status["state"])


@pytest.mark.requirement("000:Waiting, timeout and re-attach")
async def test_a_write_dispatched_before_the_deadline_finishes_and_its_result_is_replayed(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    workers: object,
    backend: GatedBackend,
) -> None:
    # A deadline long enough for a busy executor to dispatch the write before it passes.
    tool = await publish_local_write_tool(
        owner, services, backend.base, syncWaitMs=300, totalDeadlineMs=3000
    )
    body = await _timed_out_past_deadline(caller, tool)
    instance = body["workflowInstanceId"]
    assert body["error"]["retryable"] is False
    assert body["error"]["afterEffect"] is True
    assert "kept for the replay window" in body["error"]["message"]
    assert backend.received == 1
    # The write is still in flight past the deadline; now the backend answers.
    backend.gate.set()

    async def completed() -> bool:
        return await _state(caller, instance) == "COMPLETED"

    await wait_until(completed, what="the kept write's run completing")
    replayed = ok(await caller.call_tool("workflow_invoke", invoke_args(tool)))
    assert replayed["workflowInstanceId"] == instance
    assert replayed["output"]["saved"] == "claim-7"
    assert backend.received == 1


@pytest.mark.requirement("000:Waiting, timeout and re-attach")
async def test_past_the_deadline_the_timeout_is_final_even_when_cancelling_is_disabled(
    owner: McpTestClient, caller: McpTestClient
) -> None:
    # No executor: the run cannot finish, so every call waits out its share of the deadline.
    tool = await publish_tool(
        owner, syncWaitMs=200, totalDeadlineMs=400, cancellationPolicy="disabled"
    )
    body = await _timed_out_past_deadline(caller, tool)
    assert body["error"]["retryable"] is False
    status = ok(
        await caller.call_tool(
            "workflow_get_status", {"workflowInstanceId": body["workflowInstanceId"]}
        )
    )
    # A disabled policy is never cancelled by the wait: the run stays live.
    assert status["state"] == "ACCEPTED"


@asynccontextmanager
async def _executor(services: Services, overrun_s: float) -> AsyncIterator[Executor]:
    """An executor whose write overrun (the disabled policy's hard ceiling) is overrun_s."""
    runtime = WorkflowRuntime(
        ExecutionSettings(write_overrun_s=overrun_s),
        services.keyring,
        destinations=services.settings.publication.destinations.address_policy(),
    )
    settings = dataclasses.replace(FAST, overrun_ms=round(overrun_s * 1000))
    async with Executor(
        services.database, runtime.handlers(), settings, probe=services.admission
    ) as executor:
        yield executor
    await runtime.aclose()


async def _settled(caller: McpTestClient, instance: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def ended() -> bool:
        status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
        found.update(status)
        return status["state"] in ("COMPLETED", "FAILED", "CANCELLED")

    await wait_until(ended, what="the run ending")
    return found


async def _disabled_run_past_its_deadline(caller: McpTestClient, owner: McpTestClient) -> str:
    tool = await publish_tool(
        owner, syncWaitMs=200, totalDeadlineMs=300, cancellationPolicy="disabled"
    )
    body = await _timed_out_past_deadline(caller, tool)
    return str(body["workflowInstanceId"])


@pytest.mark.requirement("000:Waiting, timeout and re-attach")
async def test_a_disabled_run_past_its_hard_ceiling_is_not_claimed_and_times_out(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    instance = await _disabled_run_past_its_deadline(caller, owner)
    status = ok(await caller.call_tool("workflow_get_status", {"workflowInstanceId": instance}))
    ceiling = datetime.fromisoformat(status["deadlineAt"]) + timedelta(milliseconds=500)
    await wait_until(lambda: datetime.now(UTC) > ceiling, what="the hard ceiling passing")
    async with _executor(services, overrun_s=0.5):
        ended = await _settled(caller, instance)
    assert ended["state"] == "CANCELLED"
    assert ended["error"]["code"] == "WORKFLOW_TIMEOUT"
    assert ended["error"]["retryable"] is False
    # Ended by the deadline sweep: no worker ever took a slot for it.
    async with services.database.transaction() as conn:
        cursor = await conn.execute(
            "SELECT max(attempts) AS claims FROM workflow_task WHERE process_id = %(p)s",
            {"p": instance},
        )
        row = await cursor.fetchone()
    assert row is not None and row["claims"] == 0


@pytest.mark.requirement("000:Waiting, timeout and re-attach")
async def test_a_disabled_run_past_its_deadline_but_within_the_ceiling_still_runs(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    instance = await _disabled_run_past_its_deadline(caller, owner)
    async with _executor(services, overrun_s=30.0):
        ended = await _settled(caller, instance)
    assert ended["state"] == "COMPLETED"
