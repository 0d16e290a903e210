"""Issue 12 end to end: real processes, the publisher command and an unchanged MCP SDK client.

PostgreSQL, Workflow (`workflow-mcp serve`), the Gateway (`workflow-mcp gateway`) and the
examples' protected backend (`python -m examples.backend`) run as their own processes; Tools are
published by `workflow-mcp publish` as a subprocess, through the Gateway; then the official MCP
Python SDK client, speaking Streamable HTTP to the Gateway only, discovers and calls them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.router import load_snapshot
from runtime.security.devtools import DEV_HOST_ID, DevIdentity
from tests.support.gateway import LiveGateway, run_gateway
from tests.support.publisher_harness import tools_by_name
from tests.support.server import REPO_ROOT, LiveServer, free_port, run_server

pytestmark = pytest.mark.requirement("001:Acceptance Criteria")

OWNER = "alice"
AUTHOR = "bob"
CALLER = "carol"
TIMEOUT = httpx2.Timeout(30.0, read=60.0)
SCHEMES_ENV = "WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_SCHEMES"
EXAMPLE_BACKEND = "http://127.0.0.1:8790"


@dataclass(frozen=True)
class Stack:
    """The running processes and the publishing site the tests share."""

    workflow: LiveServer
    gateway: LiveGateway
    backend_url: str
    site: Path
    router_file: Path

    @property
    def identity(self) -> DevIdentity:
        """The development identity every process trusts."""
        return self.workflow.identity

    def token(self, user: str, *roles: str) -> str:
        """A user bearer of the development host."""
        return self.identity.user_token(host_id=DEV_HOST_ID, user_id=user, roles=roles)


@contextmanager
def _workflow_allowing_http(
    database_url: str, directory: Path, identity: DevIdentity
) -> Iterator[LiveServer]:
    """Workflow as a process that accepts http:// endpoint targets (the backend is plain http)."""
    directory.mkdir(parents=True)
    previous = os.environ.get(SCHEMES_ENV)
    os.environ[SCHEMES_ENV] = '["http", "https"]'
    with ExitStack() as stack:
        try:
            # run_server passes the environment to the process as it starts.
            server = stack.enter_context(run_server(database_url, directory, identity))
        finally:
            if previous is None:
                os.environ.pop(SCHEMES_ENV, None)
            else:
                os.environ[SCHEMES_ENV] = previous
        yield server


@contextmanager
def _backend(port: int, log: Path) -> Iterator[str]:
    """The examples' protected claims backend as its own process."""
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "examples.backend", "--port", str(port)],
            cwd=REPO_ROOT,
            stdout=output,
            stderr=output,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _until(lambda: _answers(f"{url}/notes"), what="the backend to listen")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=15)


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=1.0)
    except httpx.TransportError:
        return False
    return True


def _until(check: Callable[[], Any], *, what: str, within_s: float = 30.0) -> Any:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _site(directory: Path, backend_url: str) -> Path:
    """The examples, pointed at this test's backend, plus two Tools the walkthrough needs:
    one whose backend call fails and one that outlives its sync wait."""
    site = directory / "site"
    site.mkdir(parents=True)
    for path in (REPO_ROOT / "examples").glob("*.yaml"):
        text = path.read_text(encoding="utf-8").replace(EXAMPLE_BACKEND, backend_url)
        (site / path.name).write_text(text, encoding="utf-8")
    _write_tool(
        site,
        "claims.lookup-missing",
        {"do": [{"fetch": {"call": "http", "with": {"method": "get",
                 "endpoint": {"uri": f"{backend_url}/missing"}}}}]},
    )  # fmt: skip
    _write_tool(
        site,
        "claims.slow-summary",
        {"do": [{"nap": {"wait": "PT4S"}}, {"done": {"set": {"slept": True}}}]},
        syncWaitMs=1000,
        resultReplayMs=600000,
    )
    return site


def _write_tool(site: Path, tool: str, body: dict[str, Any], **spec: Any) -> None:
    name = tool.split(".")[1]
    definition = {
        "document": {"dsl": "1.0.3", "namespace": "e2e", "name": name, "version": "1.0.0"},
        **body,
    }
    (site / f"{name}.yaml").write_text(yaml.safe_dump(definition), encoding="utf-8")
    document = {"tool": tool, "workflow": f"{name}.yaml", "description": tool, **spec}
    (site / f"{name}.tool.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")


@pytest.fixture(scope="module")
def stack(
    live_database: str, live_identity: DevIdentity, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """Workflow, the Gateway and the backend as processes, and a publishing site."""
    directory = tmp_path_factory.mktemp("gateway-e2e")
    router_file = directory / "mcp-router.yml"
    with (
        _workflow_allowing_http(live_database, directory / "workflow", live_identity) as workflow,
        _backend(free_port(), directory / "backend.log") as backend_url,
        run_gateway(
            directory / "gateway", live_identity, workflow.mcp_url, router_file,
            host_id=DEV_HOST_ID,
        ) as gateway,
    ):  # fmt: skip
        yield Stack(workflow, gateway, backend_url, _site(directory, backend_url), router_file)


def publish(stack: Stack, site: Path, user: str, *options: str) -> subprocess.CompletedProcess[str]:
    """`workflow-mcp publish SITE` as user, through the Gateway, as its own process."""
    environment = dict(os.environ, WORKFLOW_PUBLISH_TOKEN=stack.token(user, "admin"))
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", "publish", str(site),
         "--url", stack.gateway.mcp_url, "--router", str(stack.router_file), *options],
        cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@asynccontextmanager
async def sdk_client(stack: Stack, user: str, *roles: str, era: str) -> AsyncIterator[Client]:
    """The official SDK client on the Gateway's /mcp with a user bearer and nothing else."""
    headers = {"Authorization": f"Bearer {stack.token(user, *roles)}"}
    async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http:
        transport = streamable_http_client(stack.gateway.mcp_url, http_client=http)
        async with Client(transport, mode="auto" if era == "2026-07-28" else "legacy") as client:
            yield client


async def _tool_names(client: Client) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        names += [tool.name for tool in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return names


def _served(stack: Stack, tool: str) -> bool:
    return tool in tools_by_name(load_snapshot(stack.router_file))


@pytest.fixture(scope="module")
def published(stack: Stack) -> subprocess.CompletedProcess[str]:
    """The site published once by its owner, and the Gateway serving the new snapshot."""
    run = publish(stack, stack.site, OWNER)
    assert run.returncode == 0, run.stdout + run.stderr
    # The Gateway checks its snapshot every 100 ms; wait until it lists the Tools.
    _until(lambda: _gateway_lists(stack, PUBLISHED_TOOLS), what="the Gateway to list the Tools")
    return run


PUBLISHED_TOOLS = ("loans.quick-decision", "claims.add-note", "claims.lookup-missing")


def _gateway_lists(stack: Stack, tools: tuple[str, ...]) -> bool:
    """Whether the Gateway's tools/list names every one of tools (a caller of the Tools)."""
    reply = httpx.post(
        stack.gateway.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            "Authorization": f"Bearer {stack.token(CALLER, 'genai-admin')}",
            "MCP-Protocol-Version": "2025-11-25",
        },
        timeout=10.0,
    )
    if reply.status_code != 200:
        return False
    names = {tool["name"] for tool in reply.json().get("result", {}).get("tools", [])}
    return set(tools) <= names


@pytest.fixture(params=["2026-07-28", "2025-11-25"])
def era(request: pytest.FixtureRequest) -> str:
    """Each protocol era in turn."""
    return str(request.param)


async def test_the_publisher_reports_every_tool_and_writes_the_snapshot(
    stack: Stack, published: subprocess.CompletedProcess[str]
) -> None:
    for tool in ("loans.quick-decision", "claims.add-note", "claims.slow-summary"):
        assert _served(stack, tool), published.stdout
        assert any(
            line.startswith(tool) and "Published" in line for line in published.stdout.splitlines()
        ), published.stdout


async def test_a_generic_client_discovers_the_tools_and_never_workflow_invoke(
    stack: Stack, published: object, era: str
) -> None:
    async with sdk_client(stack, CALLER, "genai-admin", era=era) as client:
        names = await _tool_names(client)
    assert {"loans.quick-decision", "claims.add-note", "claims.lookup-missing"} <= set(names)
    assert "workflow_invoke" not in names
    # genai-admin is not workflow-admin: the administration tools stay hidden.
    assert "workflow_start" not in names and "workflow_definition_save" not in names


async def test_a_call_returns_the_structured_business_outcome(
    stack: Stack, published: object, era: str
) -> None:
    async with sdk_client(stack, CALLER, "genai-admin", era=era) as client:
        approved = await client.call_tool(
            "loans.quick-decision", {"applicantId": "A-1", "creditScore": 720}
        )
        declined = await client.call_tool(
            "loans.quick-decision", {"applicantId": "A-2", "creditScore": 610}
        )
    assert approved.is_error is False
    assert approved.structured_content == {"applicantId": "A-1", "decision": "APPROVED"}
    # A business "no" is a successful call, not an error.
    assert declined.is_error is False
    assert declined.structured_content == {"applicantId": "A-2", "decision": "DECLINED"}


async def test_a_write_tool_reaches_its_protected_backend_with_the_callers_bearer(
    stack: Stack, published: object
) -> None:
    note = f"e2e {uuid.uuid4()}"
    async with sdk_client(stack, CALLER, "genai-admin", era="2025-11-25") as client:
        result = await client.call_tool("claims.add-note", {"claimId": "C-7", "note": note})
    assert result.is_error is False, result
    bearer = {"Authorization": f"Bearer {stack.token(CALLER)}"}
    notes = httpx.get(f"{stack.backend_url}/notes", headers=bearer, timeout=5).json()
    [stored] = [entry for entry in _entries(notes) if entry.get("note") == note]
    # The backend saw the caller's own bearer: the note is added by the caller.
    assert stored["claimId"] == "C-7" and stored["addedBy"] == CALLER


def _entries(notes: Any) -> list[dict[str, Any]]:
    if isinstance(notes, dict):
        notes = notes.get("notes", [])
    return [entry for entry in notes if isinstance(entry, dict)]


async def test_a_failing_task_is_a_typed_failure_on_the_first_call(
    stack: Stack, published: object
) -> None:
    async with sdk_client(stack, CALLER, "genai-admin", era="2026-07-28") as client:
        result = await client.call_tool("claims.lookup-missing", {})
    assert result.is_error is True
    failure = result.structured_content
    assert failure is not None and failure["status"] == "failed"
    assert failure["error"]["code"] == "WORKFLOW_TASK_FAILED"
    assert failure["workflowInstanceId"]
    assert result.content[0].text.startswith("WORKFLOW_TASK_FAILED: ")


async def test_a_timeout_names_the_instance_and_a_retry_re_attaches_to_it(
    stack: Stack, published: object
) -> None:
    arguments = {"ticket": str(uuid.uuid4())}
    async with sdk_client(stack, CALLER, "genai-admin", era="2026-07-28") as client:
        first = await client.call_tool("claims.slow-summary", arguments)
        assert first.is_error is True
        timeout = first.structured_content
        assert timeout is not None and timeout["error"]["code"] == "WORKFLOW_TIMEOUT"
        assert timeout["error"]["retryable"] is True
        instance = timeout["workflowInstanceId"]
        done = None
        for _ in range(30):
            retry = await client.call_tool("claims.slow-summary", arguments)
            if not retry.is_error:
                done = retry
                break
            assert retry.structured_content is not None
            assert retry.structured_content["workflowInstanceId"] == instance
    assert done is not None, "the run never completed"
    assert done.structured_content == {"slept": True}
    assert (done.meta or {}).get("io.lightapi.workflow/workflowInstanceId") == instance


async def test_a_tool_published_by_someone_else_waits_for_the_owner_then_serves(
    stack: Stack, published: object, tmp_path: Path
) -> None:
    # Bob pins Alice's quick-decision definition under a Tool of his own.
    site = tmp_path / "bob"
    site.mkdir()
    shutil.copy(stack.site / "quick-decision.yaml", site / "quick-decision.yaml")
    spec = {
        "tool": "loans.second-opinion",
        "workflow": "quick-decision.yaml",
        "description": "Bob's Tool over Alice's workflow",
        "definitionOwner": {"userId": OWNER},
    }
    (site / "second-opinion.tool.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    waiting = publish(stack, site, AUTHOR)
    assert waiting.returncode == 0, waiting.stdout + waiting.stderr
    assert f"Waiting for approval from {OWNER}" in waiting.stdout, waiting.stdout
    assert not _served(stack, "loans.second-opinion")

    async with sdk_client(stack, OWNER, "admin", era="2026-07-28") as owner:
        listing = await owner.call_tool(
            "workflow_binding_list",
            {"hostId": DEV_HOST_ID, "role": "owner", "status": "pendingApproval"},
        )
        assert listing.is_error is False, listing
        [pending] = [
            item
            for item in (listing.structured_content or {})["items"]
            if item["toolName"] == "loans.second-opinion"
        ]
        decision = await owner.call_tool(
            "workflow_binding_decide",
            {"hostId": DEV_HOST_ID, "bindingId": pending["bindingId"],
             "expectedBindingDigest": pending["bindingDigest"], "decision": "approve",
             "comment": "reviewed", "operationId": str(uuid.uuid4())},
        )  # fmt: skip
        assert decision.is_error is False, decision
        assert (decision.structured_content or {})["status"] == "active"

    again = publish(stack, site, AUTHOR)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _served(stack, "loans.second-opinion"), again.stdout
    async with sdk_client(stack, CALLER, "genai-admin", era="2025-11-25") as client:
        result = await _until_served(client, "loans.second-opinion")
    assert result.structured_content == {"applicantId": "A-3", "decision": "APPROVED"}

    # The owner revokes the revision: the very next call is refused.
    async with sdk_client(stack, OWNER, "admin", era="2026-07-28") as owner:
        revoked = await owner.call_tool(
            "workflow_binding_revoke",
            {"hostId": DEV_HOST_ID, "bindingId": pending["bindingId"],
             "expectedBindingDigest": pending["bindingDigest"], "comment": "no longer",
             "operationId": str(uuid.uuid4())},
        )  # fmt: skip
        assert revoked.is_error is False, revoked
    async with sdk_client(stack, CALLER, "genai-admin", era="2025-11-25") as client:
        refused = await client.call_tool(
            "loans.second-opinion", {"applicantId": "A-3", "creditScore": 780}
        )
    assert refused.is_error is True
    assert (refused.structured_content or {})["error"]["code"] == "WORKFLOW_POLICY_DENIED"


async def _until_served(client: Client, tool: str) -> Any:
    """The first successful call: the Gateway picks up the new snapshot within its interval."""
    for _ in range(50):
        result = await client.call_tool(tool, {"applicantId": "A-3", "creditScore": 780})
        if not result.is_error:
            return result
        time.sleep(0.1)
    raise AssertionError(f"{tool} was never served: {result}")
