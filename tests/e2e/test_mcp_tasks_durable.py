"""A durable MCP task (issue 35 item 4): a second service process on the same database answers
tasks/get and tasks/update for a task another process created, and goes on after a kill -9 of
the creator. Real processes (runtime.cli serve), real PostgreSQL, raw JSON-RPC."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.binding_builders import OWNER, new_id
from tests.support.human_tasks import approval_yaml
from tests.support.invocation import client, save_head
from tests.support.mcp_tasks import get_task, modern, start_task, task_reaching
from tests.support.server import LiveServer, run_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.requirement("issue-35:mcp-tasks"),
]


def _kill(server: LiveServer) -> None:
    assert server.process is not None
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()


async def test_a_second_process_answers_a_task_after_a_kill_9_of_the_process_that_created_it(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    with (
        run_server(database_url, tmp_path / "first", live_identity) as first,
        run_server(database_url, tmp_path / "second", live_identity) as second,
    ):
        async with (
            httpx.AsyncClient(base_url=first.base_url, timeout=60.0) as to_first,
            httpx.AsyncClient(base_url=second.base_url, timeout=60.0) as to_second,
        ):
            owner = client(to_first, live_identity, OWNER)
            starter = client(to_first, live_identity)
            elsewhere = client(to_second, live_identity)
            wf_def_id = new_id()
            await save_head(owner, wf_def_id, approval_yaml(role="admin"))
            created = await start_task(starter, wf_def_id)
            task_id = created["taskId"]
            # Created durably: the other process resolves it at once.
            assert (await get_task(elsewhere, task_id))["taskId"] == task_id
            asked = await task_reaching(elsewhere, task_id, ("input_required",), 60)
            _kill(first)
            [key] = asked["inputRequests"]
            responses = {key: {"action": "accept", "content": {"value": "APPROVED"}}}
            update = {"taskId": task_id, "inputResponses": responses}
            reply = await modern(elsewhere, "tasks/update", update)
            assert reply.result["resultType"] == "complete"
            done = await task_reaching(elsewhere, task_id, ("completed",), 60)
            assert done["result"]["structuredContent"]["output"] == {
                "decision": "APPROVED",
                "by": "caller-1",
            }
