"""A real server for black-box suites: `runtime.cli serve` in a subprocess on a test database.

The server runs under uvicorn in its own process (its own event loop and psycopg pool), so
clients in the tests (requests, the MCP SDK) talk to it over TCP exactly as deployments do.
Fixtures (import them into a conftest):

- ``live_identity`` (session): a development key pair, JWKS and keyring the server trusts.
- ``live_database`` (session): a fresh copy of the migrated template database.
- ``live_server`` (session): the running server; stopped (and never left behind) at teardown.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import msgspec
import yaml

from runtime.addresses import LOOPBACK_NETWORKS
from runtime.security.devtools import DevIdentity
from tests.support.tokens import auth_headers

if TYPE_CHECKING:
    from tests.conftest import PgCluster

REPO_ROOT = Path(__file__).resolve().parents[2]
# Start-up includes importing handlers and opening the pool; generous on a loaded 2-core box.
START_TIMEOUT_SECONDS = 90.0
STOP_TIMEOUT_SECONDS = 15.0
LIVE_PAGE_SIZE = 2


@dataclass(frozen=True)
class LiveServer:
    """A running service: where it listens and the identity whose tokens it trusts."""

    base_url: str
    identity: DevIdentity
    log_path: Path
    # The server process, for tests that signal it themselves (stop_process still reaps it).
    process: subprocess.Popen[bytes] | None = field(default=None, compare=False, repr=False)

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint."""
        return f"{self.base_url}/mcp"

    def auth_headers(self, **user_claims: Any) -> dict[str, str]:
        """Valid user (workflow-admin) and Gateway bearers for the development host."""
        user_claims.setdefault("roles", ("workflow-admin",))
        user = self.identity.user_token(**user_claims)
        return auth_headers(self.identity, user, self.identity.app_token())

    def log_tail(self, limit: int = 4000) -> str:
        """The end of the server's combined output, for failure messages."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-limit:]
        except OSError:
            return ""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_config(directory: Path, identity: DevIdentity, port: int) -> Path:
    """A WORKFLOW_CONFIG file: listen on port, trust identity, small pools and pages."""
    config = {
        "server": {
            "host": "127.0.0.1",
            "port": port,
            "tools_list_page_size": LIVE_PAGE_SIZE,
        },
        "store": {"data_dir": str(directory / "data"), "pool_min_size": 1, "pool_max_size": 4},
        "security": msgspec.to_builtins(identity.settings()),
        # The test configuration: backends of the tests listen on loopback.
        "publication": {"destinations": {"allowed_networks": list(LOOPBACK_NETWORKS)}},
    }
    path = directory / "workflow.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=True), encoding="utf-8")
    return path


def wait_until_answering(
    process: subprocess.Popen[bytes], server: LiveServer, path: str = "/readyz"
) -> None:
    """Poll the server's path until it answers 200; fail when the process exits or time runs out."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(f"{server.base_url}{path}", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not ready after {START_TIMEOUT_SECONDS}s:\n{server.log_tail()}")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM a process group leader, SIGKILL it when it does not stop in time."""
    if process.poll() is not None:
        return
    # The server leads its own process group (start_new_session), so this reaches only it.
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def run_server(
    database_url: str,
    directory: Path,
    identity: DevIdentity,
    args: Sequence[str] = (),
    stderr_path: Path | None = None,
    port: int | None = None,
) -> Iterator[LiveServer]:
    """Run `runtime.cli serve [args]` on database_url until the block exits (also on failure).

    Its output goes to the LiveServer's log; stderr alone to stderr_path when one is given.
    port: a fixed one (a restart a Gateway keeps pointing at), else a free one.
    """
    port = port or free_port()
    config = write_config(directory, identity, port)
    env = dict(os.environ, DATABASE_URL=database_url, WORKFLOW_CONFIG=str(config))
    env["PYTHONUNBUFFERED"] = "1"
    server = LiveServer(f"http://127.0.0.1:{port}", identity, directory / "server.log")
    with ExitStack() as files:
        log = files.enter_context(server.log_path.open("wb"))
        errors = log if stderr_path is None else files.enter_context(stderr_path.open("wb"))
        process = subprocess.Popen(
            [sys.executable, "-m", "runtime.cli", "serve", "--config", str(config), *args],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=errors,
            start_new_session=True,
        )
    server = replace(server, process=process)
    # Covers exits where fixture teardown never runs; unregistered after a normal stop.
    atexit.register(stop_process, process)
    try:
        wait_until_answering(process, server)
        yield server
    finally:
        stop_process(process)
        atexit.unregister(stop_process)


@asynccontextmanager
async def template_copy(pg_cluster: PgCluster, template: str, prefix: str) -> AsyncIterator[str]:
    """A fresh copy of the migrated template database, dropped when the block exits."""
    name = pg_cluster.new_name(prefix)
    url = await pg_cluster.create_database(name, template=template)
    try:
        yield url
    finally:
        await pg_cluster.drop_database(name)
