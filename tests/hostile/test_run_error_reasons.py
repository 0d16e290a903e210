"""A failed outbound call leaves the runtime's own reason in the stored run error, never the
response's data."""

from __future__ import annotations

import uuid

from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.security import Keyring
from runtime.store import Database
from tests.support.execution import LOCAL_BACKENDS, LocalServer, document, executor, serving
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
    error = run["error"]
    assert error["code"] == "WORKFLOW_TASK_FAILED"
    assert error["message"].endswith(": response larger than 8 bytes")
    # The body the server sent ({"ok": true, "path": "/claims"}) is nowhere in the error.
    assert "/claims" not in str(error) and "ok" not in error["message"].split(":")[-1]
