"""Protected HTTP calls carry the run's selected user token, and only where the task asks."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import yaml

from runtime.collaborators import Services
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from tests.support.binding_builders import EVIDENCE, HOST, new_id
from tests.support.checker import publish_arguments
from tests.support.execution import serving
from tests.support.invocation import (
    CALLER,
    Tool,
    invoke_args,
    ok,
    refused,
    save_head,
    until_settled,
)
from tests.support.mcp import MODERN, McpTestClient
from tests.support.protected_backend import (
    ProtectedBackend,
    calling_definition,
    http_task,
    publish_calling_tool,
    verifying_executor,
)
from tests.support.tokens import auth_headers
from tests.support.waiting import wait_until

pytestmark = pytest.mark.requirement("000:Run credential selection")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Endpoint targets on the local backend (plain http on 127.0.0.1) are allowed."""
    settings.publication.destinations.allowed_schemes = ["http", "https"]
    return settings


@pytest.fixture
async def backend() -> AsyncIterator[ProtectedBackend]:
    async with serving(ProtectedBackend()) as running:  # type: ignore[arg-type]
        yield running


def _caller(
    http: httpx.AsyncClient, identity: DevIdentity, **token: Any
) -> tuple[McpTestClient, str]:
    user = identity.user_token(
        host_id=HOST, user_id=CALLER, roles=("admin",), client_id="portal", **token
    )
    caller = McpTestClient(
        http, MODERN, auth_headers(identity, user, identity.app_token(host_id=HOST))
    )
    return caller, user


async def _two_protected_calls(owner: McpTestClient, backend: ProtectedBackend) -> Tool:
    """A Tool whose run makes two authenticated GETs to the backend, one after the other."""
    uri = f"{backend.base}/claims"
    text = calling_definition(
        http_task("first", "GET", uri, authenticated=True, write=False),
        http_task("second", "GET", uri, authenticated=True, write=False),
    )
    return await publish_calling_tool(owner, text, uri)


async def test_a_protected_http_call_carries_the_callers_token_and_an_unprotected_one_none(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: ProtectedBackend,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    uri = f"{backend.base}/claims"
    text = calling_definition(
        http_task("plain", "GET", uri, authenticated=False, write=False),
        http_task("fetch", "GET", uri, authenticated=True, write=False),
    )
    tool = await publish_calling_tool(owner, text, uri)
    caller, user = _caller(http, dev_identity)
    backend.accepted.add(user)
    async with verifying_executor(services):
        result = await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
    # The unprotected task sent no credential (and was refused); that ended the run.
    assert backend.seen[0] is None
    refused(result, "WORKFLOW_TASK_FAILED")
    text = calling_definition(http_task("fetch", "GET", uri, authenticated=True, write=False))
    tool = await publish_calling_tool(owner, text, uri)
    async with verifying_executor(services):
        result = await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
    assert ok(result)["output"]["claim"] == "C-1001"
    assert backend.seen[-1] == f"Bearer {user}"
    assert user not in caplog.text
    assert user.split(".")[2] not in caplog.text


async def test_a_token_that_expires_mid_run_stops_the_next_protected_call(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: ProtectedBackend,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    # Seed 000: the original token is used "while it still verifies": with no clock-skew
    # leeway, verification fails at exp, and so does the next call.
    services.settings.security.clock_skew_seconds = 0
    tool = await _two_protected_calls(owner, backend)
    expires_at = int(time.time()) + 3
    caller, user = _caller(http, dev_identity, expires_at=expires_at)
    backend.accepted.add(user)

    async def outlive_the_token() -> None:
        await wait_until(lambda: time.time() > expires_at + 0.2, what="the token expiring")

    backend.before_first_reply = outlive_the_token
    async with verifying_executor(services):
        result = await caller.call_tool("workflow_invoke", invoke_args(tool))
    body = refused(result, "WORKFLOW_TASK_FAILED")
    assert backend.seen == [f"Bearer {user}"]  # the second call never left
    assert body["error"]["details"]["status"] == 401
    assert body["error"]["details"]["type"].endswith("/authentication")
    assert user not in str(body) and user not in caplog.text


async def test_a_grant_the_backend_revoked_mid_run_stops_the_next_call_with_a_stable_error(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: ProtectedBackend,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    tool = await _two_protected_calls(owner, backend)
    caller, user = _caller(http, dev_identity)
    backend.accepted.add(user)

    def revoke() -> None:
        # The user's delegation is withdrawn at the protected backend once the first call ran.
        backend.accepted.discard(user)

    backend.after_reply = revoke
    async with verifying_executor(services):
        result = await until_settled(lambda: caller.call_tool("workflow_invoke", invoke_args(tool)))
    body = refused(result, "WORKFLOW_TASK_FAILED")
    assert backend.seen == [f"Bearer {user}"] * 2  # the second call was refused
    assert body["error"]["details"]["status"] == 401
    assert user not in str(body) and user not in caplog.text


@pytest.mark.requirement("000:Idempotency")
@pytest.mark.requirement("000:Task evidence")
async def test_a_write_tool_sends_the_users_token_once_and_replays_within_the_window(
    http: httpx.AsyncClient,
    dev_identity: DevIdentity,
    owner: McpTestClient,
    services: Services,
    backend: ProtectedBackend,
) -> None:
    uri = f"{backend.base}/claims"
    text = calling_definition(http_task("save", "POST", uri, authenticated=True, write=True))
    tool = await publish_calling_tool(owner, text, uri, write=True)
    read = ok(
        await owner.call_tool("workflow_binding_get", {"hostId": HOST, "toolId": tool.tool_id})
    )
    assert [task["approvalEvidenceDigest"] for task in read["revision"]["writeTasks"]] == [EVIDENCE]
    caller, user = _caller(http, dev_identity)
    backend.accepted.add(user)
    args = invoke_args(tool)  # the write Tool derives its key from the input
    async with verifying_executor(services):
        first = ok(await until_settled(lambda: caller.call_tool("workflow_invoke", args)))
        again = ok(await caller.call_tool("workflow_invoke", args))
    assert backend.seen == [f"Bearer {user}"]  # one backend call, with the user's token
    assert again["workflowInstanceId"] == first["workflowInstanceId"]
    assert again["output"] == first["output"] == {"claim": "C-1001", "n": 1}


@pytest.mark.requirement("000:Binding publish")
@pytest.mark.parametrize(
    "policy",
    [
        {"basic": {"username": "u", "password": "p"}},
        {"bearer": {"token": "abc"}},
        {"oauth2": {"use": "runCredential"}},
        {"bearer": {"use": "someSecret"}},
    ],
)
async def test_an_authentication_policy_the_runtime_cannot_honour_is_refused_at_publication(
    owner: McpTestClient, policy: dict[str, Any]
) -> None:
    entry = yaml.safe_dump({"use": {"authentications": {"legacyApi": policy}}})
    fetch = http_task(
        "fetch", "GET", "https://api.example.com/claims", authenticated=False, write=False
    )
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, calling_definition(fetch))
    args = publish_arguments(wf_def_id, calling_definition(fetch, policy=entry))
    body = refused(
        await owner.call_tool("workflow_definition_publish", args), "WORKFLOW_INPUT_INVALID"
    )
    assert "legacyApi" in body["error"]["message"]
