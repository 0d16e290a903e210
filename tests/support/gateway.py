"""The reference Gateway for tests: in process in front of the in-process Workflow app, or as a
real `workflow-mcp gateway` subprocess in front of a live service (qualification).

In-process fixtures (import them into a test module): ``router_file`` (the test's snapshot
path), ``workflow_seen`` (every request the Gateway sent to Workflow), ``gateway`` (the wired
Gateway) and ``gateway_http`` (a client on its ASGI app). Helpers build snapshot entries from a
published Tool and MCP clients for Gateway callers.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec
import psycopg
import yaml

from gateway.router import RoutedTool, RouterSnapshot, write_snapshot
from gateway.settings import GatewayConfig, GatewaySettings
from runtime.security.devtools import DevIdentity
from runtime.settings import Settings
from tests.support.binding_builders import HOST
from tests.support.invocation import Tool
from tests.support.mcp import MODERN, McpTestClient
from tests.support.server import (
    REPO_ROOT,
    LiveServer,
    free_port,
    stop_process,
)

WORKFLOW_URL = "http://workflow.test/mcp"
TOOL_NAME = "claims.summarize"
# The snapshot's published input schema: stricter than the definition's, so the Gateway's own
# check is observable (Workflow never sees a call it refuses).
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"claimId": {"type": "string", "pattern": "^C-[0-9]{1,8}$"}},
    "required": ["claimId"],
    "additionalProperties": False,
}


def entry(tool: Tool, name: str = TOOL_NAME, **changes: Any) -> RoutedTool:
    """The snapshot entry of a published Tool (changes override fields by snake_case name)."""
    values: dict[str, Any] = {
        "name": name,
        "description": "Summarize a claim",
        "stable_tool_ref": tool.tool_id,
        "workflow_definition_id": tool.wf_def_id,
        "workflow_version": "1.2.0",
        "definition_digest": tool.definition_digest,
        "binding_digest": tool.binding_digest,
        "input_schema": INPUT_SCHEMA,
        "sync_wait_ms": 20000,
        "maximum_request_bytes": 65536,
    }
    values.update(changes)
    return RoutedTool(**values)


def write_tools(path: Path, *tools: RoutedTool) -> None:
    """Replace the snapshot file with these Tools."""
    write_snapshot(path, RouterSnapshot(tools=tuple(tools)))


def gateway_client(
    http: httpx.AsyncClient,
    identity: DevIdentity,
    *,
    roles: Sequence[str] = ("genai-admin",),
    user_id: str = "caller-1",
    era: str = MODERN,
    host_id: str = HOST,
    scope_token: str | None = None,
) -> McpTestClient:
    """An MCP client of the Gateway: a user bearer only (X-Scope-Token when given)."""
    user = identity.user_token(host_id=host_id, user_id=user_id, roles=tuple(roles))
    headers = {"Authorization": f"Bearer {user}"}
    if scope_token is not None:
        headers["X-Scope-Token"] = f"Bearer {scope_token}"
    return McpTestClient(http, era, headers)


@dataclass
class RecordingTransport(httpx.AsyncBaseTransport):
    """Passes requests to Workflow (an ASGI app) and remembers each one it sent."""

    inner: httpx.AsyncBaseTransport
    requests: list[httpx.Request] = field(default_factory=list)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Record, then forward."""
        self.requests.append(request)
        return await self.inner.handle_async_request(request)

    def tool_names(self) -> list[str]:
        """The tools/call names Workflow was asked for, in order."""
        return [msgspec.json.decode(r.content)["params"]["name"] for r in self.requests]


def gateway_settings(settings: Settings, router_file: Path, **changes: Any) -> GatewayConfig:
    """The Workflow test settings with a gateway section for router_file (checked every call)."""
    section = GatewaySettings(
        router_file=str(router_file), reload_interval_ms=0, workflow_url=WORKFLOW_URL,
        tools_list_page_size=100,
    )  # fmt: skip
    sections = {name: getattr(settings, name) for name in settings.__struct_fields__}
    return GatewayConfig(**sections, gateway=msgspec.structs.replace(section, **changes))


# --- the Gateway as a real process --------------------------------------------------------

START_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class LiveGateway:
    """A running `workflow-mcp gateway`: where it listens, its snapshot and its log."""

    base_url: str
    router_file: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint."""
        return f"{self.base_url}/mcp"

    def log_tail(self, limit: int = 4000) -> str:
        """The end of the Gateway's output, for failure messages."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-limit:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the Gateway (kill -9: no shutdown, no goodbye to Workflow)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def write_gateway_config(
    directory: Path,
    identity: DevIdentity,
    *,
    port: int,
    workflow_url: str,
    router_file: Path,
    host_id: str,
) -> Path:
    """A config file: trust identity, listen on port, a static app bearer for host_id."""
    config = {
        "security": msgspec.to_builtins(identity.settings()),
        "gateway": {
            "host": "127.0.0.1",
            "port": port,
            "router_file": str(router_file),
            "workflow_url": workflow_url,
            "reload_interval_ms": 100,
            "app_token_file": str(directory / "gateway-app-token"),
        },
    }
    token = identity.app_token(host_id=host_id, ttl=6 * 3600)
    (directory / "gateway-app-token").write_text(token, encoding="ascii")
    path = directory / "gateway.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=True), encoding="utf-8")
    return path


def _wait_until_ready(gateway: LiveGateway) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if gateway.process.poll() is not None:
            raise RuntimeError(
                f"gateway exited: {gateway.process.returncode}\n{gateway.log_tail()}"
            )
        try:
            if httpx.get(f"{gateway.base_url}/healthz", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"gateway not ready after {START_TIMEOUT_SECONDS}s\n{gateway.log_tail()}")


@contextmanager
def run_gateway(
    directory: Path,
    identity: DevIdentity,
    workflow_url: str,
    router_file: Path,
    *,
    host_id: str,
    port: int | None = None,
) -> Iterator[LiveGateway]:
    """Run `workflow-mcp gateway` until the block exits (stopped also on failure)."""
    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    config = write_gateway_config(
        directory, identity, port=port, workflow_url=workflow_url, router_file=router_file,
        host_id=host_id,
    )  # fmt: skip
    env = {key: value for key, value in os.environ.items() if not key.startswith("WORKFLOW_")}
    env["PYTHONUNBUFFERED"] = "1"
    log_path = directory / f"gateway-{port}.log"
    with ExitStack() as files:
        log = files.enter_context(log_path.open("ab"))
        process = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", "gateway", "--config", str(config)],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True,
        )  # fmt: skip
    atexit.register(stop_process, process)
    gateway = LiveGateway(f"http://127.0.0.1:{port}", router_file, log_path, process)
    try:
        _wait_until_ready(gateway)
        yield gateway
    finally:
        stop_process(process)
        atexit.unregister(stop_process)


# --- a stack for the qualification suite: the service and two Gateways, real processes -------


@dataclass(frozen=True)
class GatewayStack:
    """The service and two Gateway processes sharing one snapshot file."""

    server: LiveServer
    database_url: str
    identity: DevIdentity
    directory: Path
    router_file: Path
    gateways: tuple[LiveGateway, LiveGateway]

    async def runs_of(self, binding_id: str) -> list[tuple[str, str]]:
        """(instance id, state) of every run admitted under one binding revision."""
        async with await psycopg.AsyncConnection.connect(self.database_url) as conn:
            cursor = await conn.execute(
                "SELECT process_id::text, state FROM workflow_process WHERE binding_id = %s",
                (binding_id,),
            )
            return [(str(row[0]), str(row[1])) for row in await cursor.fetchall()]
