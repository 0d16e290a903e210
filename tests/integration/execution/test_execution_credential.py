"""Run credential selection: each call verifies the run's token; a dead token never leaves."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from runtime.execution import ExecutionSettings, WorkflowRuntime
from runtime.security import SecretToken
from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.execution import LOCAL_BACKENDS, LocalServer, executor, serving
from tests.support.execution_runs import start_workflow_run
from tests.support.publication_builders import HOST
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("000:Run credential selection")


@pytest.fixture
def identity(tmp_path: Path) -> DevIdentity:
    return DevIdentity(tmp_path / "dev")


async def run_with_token(
    db: Database, server: LocalServer, wf_def_id: str, identity: DevIdentity, token: str
) -> dict[str, Any]:
    keyring = identity.keyring()
    # No clock-skew leeway: the test token's exp is the moment it stops verifying.
    security = msgspec.structs.replace(identity.settings(), clock_skew_seconds=0)
    settings = ExecutionSettings(gateway_mcp_url=f"{server.base}/mcp")
    runtime = WorkflowRuntime.verifying(settings, keyring, security, destinations=LOCAL_BACKENDS)
    async with executor(db, runtime):
        pid = await start_workflow_run(
            db, host_id=HOST, user_id="u-1", input={}, keyring=keyring,
            credential=SecretToken(token), wf_def_id=wf_def_id, version="1.2.0",
            timeout_ms=20_000,
        )  # fmt: skip
        from runtime.execution import wait_for_result

        run = await wait_for_result(db, HOST, pid, timeout=20)
    assert run is not None
    return run


async def test_a_verified_token_is_used_for_every_call(
    db: Database, published: str, identity: DevIdentity
) -> None:
    token = identity.user_token(host_id=HOST, ttl=60)  # inside the margin: still the original
    async with serving(LocalServer()) as server:
        run = await run_with_token(db, server, published, identity, token)
    assert run.state == "COMPLETED", run
    assert [c["headers"]["authorization"] for c in server.tool_calls] == [f"Bearer {token}"] * 2


async def test_a_token_that_does_not_verify_is_never_sent(
    db: Database, published: str, identity: DevIdentity, tmp_path: Path
) -> None:
    stranger = DevIdentity(tmp_path / "stranger")  # a key the service does not trust
    token = stranger.user_token(host_id=HOST)
    async with serving(LocalServer()) as server:
        run = await run_with_token(db, server, published, identity, token)
    assert run.state == "FAILED" and server.tool_calls == []
    assert run.error["code"] == "WORKFLOW_TASK_FAILED"
    assert run.error["details"]["status"] == 401
    assert run.error["details"]["type"].endswith("/authentication")
    assert token not in str(run.error)


async def test_a_token_that_expires_mid_run_fails_the_next_call_with_authentication(
    db: Database, published: str, identity: DevIdentity
) -> None:
    expires_at = int(time.time()) + 2
    token = identity.user_token(host_id=HOST, expires_at=expires_at)
    server = LocalServer()

    async def outlive_the_token() -> None:
        # The first call is answered only once the token is dead: the second must not leave.
        await wait_until(
            lambda: time.time() > expires_at + 0.2, what="the user token expiring", within_s=10
        )

    server.on_tool_call = outlive_the_token
    async with serving(server):
        run = await run_with_token(db, server, published, identity, token)
    assert len(server.tool_calls) == 1
    assert run.state == "FAILED" and run.error["details"]["status"] == 401
    assert run.error["details"]["type"].endswith("/authentication")
