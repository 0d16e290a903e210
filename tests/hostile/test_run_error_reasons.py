"""A failed outbound call leaves the runtime's own reason in the stored run error, never the
response's data."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.security import Keyring
from runtime.store import Database
from tests.support.execution import (
    LOCAL_BACKENDS,
    LocalServer,
    Receive,
    Send,
    document,
    executor,
    serving,
)
from tests.support.execution_runs import finished, start


async def test_a_response_over_the_size_bound_is_stored_as_that_reason(
    db: Database, keyring: Keyring
) -> None:
    host = str(uuid.uuid4())
    async with serving(LocalServer()) as server:
        settings = ExecutionSettings(http_allowlist=[f"{server.base}/"], max_response_bytes=8)
        get = {"call": "http", "with": {"method": "get", "endpoint": f"{server.base}/claims"}}
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(db, keyring, document([{"get": get}]), {}, host_id=host)
            run = await finished(db, host, pid)
    error = run.error
    assert error["code"] == "WORKFLOW_TASK_FAILED"
    assert error["message"].endswith(": response larger than 8 bytes")
    # The body the server sent ({"ok": true, "path": "/claims"}) is nowhere in the error.
    assert "/claims" not in str(error) and "ok" not in error["message"].split(":")[-1]


@dataclass
class RedirectingServer(LocalServer):
    """Answers every request with a 302 to a Location carrying data of its own."""

    location: str = "/elsewhere/private-path?token=server-data"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"location", self.location.encode()), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 302, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize(
    ("redirect", "code", "reason"),
    [
        (False, "WORKFLOW_TASK_FAILED", "redirect refused: the call does not follow redirects"),
        (True, "WORKFLOW_POLICY_DENIED", "redirect to a URI outside the endpoint targets refused"),
    ],
)
async def test_a_refused_redirect_is_stored_with_why_and_without_its_location(
    db: Database, keyring: Keyring, redirect: bool, code: str, reason: str
) -> None:
    host = str(uuid.uuid4())
    async with serving(RedirectingServer()) as server:
        settings = ExecutionSettings(http_allowlist=[f"{server.base}/api/"])
        call = {"method": "get", "endpoint": f"{server.base}/api/claims", "redirect": redirect}
        get = {"call": "http", "with": call}
        async with executor(db, WorkflowRuntime(settings, keyring, destinations=LOCAL_BACKENDS)):
            pid = await start(db, keyring, document([{"get": get}]), {}, host_id=host)
            run = await finished(db, host, pid)
    error = run.error
    assert error["code"] == code
    assert reason in error["message"]
    assert "private-path" not in str(error) and "server-data" not in str(error)
