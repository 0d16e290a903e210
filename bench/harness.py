"""The service under benchmark: PostgreSQL, a backend, the real server process, a Gateway client.

Everything runs on loopback in a temp dir and is stopped when the context exits. The server is
`runtime.cli serve` (litestar under uvicorn) in a child process, so its CPU time can be read
from /proc apart from the load generator's.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec
import psycopg
import yaml

from runtime.security.devtools import DevIdentity
from runtime.store import EmbeddedPostgres
from tests.support.tokens import auth_headers

REPO = Path(__file__).resolve().parent.parent
MODERN = "2026-07-28"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
START_TIMEOUT_S = 90.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (all its threads) from /proc; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(root_pid: int) -> float:
    """CPU of root_pid and its direct children, live or reaped (the postmaster and backends).

    A backend that exits takes its CPU out of the live children; once the postmaster reaps it,
    that CPU is in the postmaster's cutime and cstime, which count here. Without them a peer
    that closes connections during a phase measured negative PostgreSQL CPU.
    """
    try:
        root = Path(f"/proc/{root_pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    total = sum(int(field) for field in root[11:15]) / CLOCK_TICKS
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == root_pid:
            total += (int(stat[11]) + int(stat[12])) / CLOCK_TICKS
    return total


def machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent busy so far (/proc/stat: not idle, not iowait).

    On a machine whose cores the driver, PostgreSQL and the servers share, what a phase costs
    all of them together is what bounds its goodput; 0 where /proc/stat is unreadable.
    """
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0
    # user nice system idle iowait irq softirq steal: steal is time the machine did not get.
    return (sum(fields) - fields[3] - fields[4] - fields[7]) / CLOCK_TICKS


@dataclass
class Service:
    """A running stack: its URLs, identity, and the pids whose CPU is measured."""

    base_url: str
    database_url: str
    identity: DevIdentity
    server: subprocess.Popen[bytes]
    postmaster_pid: int | None
    backend_url: str
    log_path: Path

    @property
    def mcp_url(self) -> str:
        """The MCP endpoint."""
        return f"{self.base_url}/mcp"

    def server_cpu(self) -> float:
        """CPU seconds of the service process so far."""
        return cpu_seconds(self.server.pid)

    def postgres_cpu(self) -> float:
        """CPU seconds of PostgreSQL (postmaster and live backends); 0 for an external server."""
        return tree_cpu_seconds(self.postmaster_pid) if self.postmaster_pid else 0.0

    def log_tail(self, limit: int = 3000) -> str:
        """The end of the server's output."""
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""


def _config(directory: Path, identity: DevIdentity, port: int, extra: dict[str, Any]) -> Path:
    config: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": port},
        "store": {"data_dir": str(directory / "data")},
        "security": msgspec.to_builtins(identity.settings()),
        # The backend listens on plain http on loopback; its endpoint targets say dev.
        "publication": {
            "destinations": {
                "allowed_schemes": ["http", "https"],
                "allowed_networks": ["127.0.0.0/8", "::1/128"],
            }
        },
        "execution": {"outbound": {"environment": "dev"}},
    }
    for section, values in extra.items():
        config.setdefault(section, {}).update(values)
    path = directory / "workflow.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=True), encoding="utf-8")
    return path


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    # Each child leads its own process group (start_new_session): this reaches only it.
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _spawn(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_ready(service: Service) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if service.server.poll() is not None:
            raise RuntimeError(f"server exited:\n{service.log_tail()}")
        try:
            if httpx.get(f"{service.base_url}/readyz", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not ready after {START_TIMEOUT_S}s:\n{service.log_tail()}")


@contextmanager
def database(fast: bool) -> Iterator[tuple[str, int | None]]:
    """$DATABASE_URL, or an embedded cluster in a temp dir; (conninfo, postmaster pid)."""
    external = os.environ.get("DATABASE_URL")
    if external:
        yield external, None
        return
    base = Path(tempfile.mkdtemp(prefix="wf-bench-invoke-"))
    base.chmod(0o755)
    cluster = EmbeddedPostgres(base / "pg", database="bench", fast=fast)
    try:
        url = cluster.start()
        running = cluster.running_server()
        yield url, running.pid if running is not None else None
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def running_service(
    database_url: str, postmaster_pid: int | None, extra_config: dict[str, Any]
) -> Iterator[Service]:
    """The backend and the server on database_url until the block exits (also on failure)."""
    directory = Path(tempfile.mkdtemp(prefix="wf-bench-service-"))
    identity = DevIdentity(directory / "identity")
    backend_port, port = free_port(), free_port()
    env = dict(os.environ, DATABASE_URL=database_url, PYTHONUNBUFFERED="1")
    backend = _spawn(
        [sys.executable, "-m", "bench.backend", str(backend_port)], env, directory / "backend.log"
    )
    config = _config(directory, identity, port, extra_config)
    env["WORKFLOW_CONFIG"] = str(config)
    server = _spawn(
        [sys.executable, "-m", "runtime.cli", "serve", "--config", str(config)],
        env,
        directory / "server.log",
    )
    service = Service(
        base_url=f"http://127.0.0.1:{port}",
        database_url=database_url,
        identity=identity,
        server=server,
        postmaster_pid=postmaster_pid,
        backend_url=f"http://127.0.0.1:{backend_port}",
        log_path=directory / "server.log",
    )
    try:
        _wait_ready(service)
        yield service
    finally:
        _stop(server)
        _stop(backend)
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True)
class Reply:
    """One answer of POST /mcp, classified: OK, a workflow error code, RPC_n, HTTP_n."""

    outcome: str
    retry_after_ms: int | None = None
    body: Any = None


def classify(status: int, body: Any) -> Reply:
    """The outcome of a tools/call or tools/list reply."""
    if status != 200 or not isinstance(body, dict):
        return Reply(f"HTTP_{status}", body=body)
    if "error" in body:
        return Reply(f"RPC_{body['error'].get('code')}", body=body)
    result = body.get("result", {})
    if result.get("isError"):
        error = (result.get("structuredContent") or {}).get("error") or {}
        return Reply(str(error.get("code", "UNKNOWN")), error.get("retryAfterMs"), body)
    return Reply("OK", body=body)


@dataclass
class Gateway:
    """POSTs /mcp exactly as the Gateway does: user bearer plus X-Scope-Token app bearer."""

    http: httpx.AsyncClient
    url: str
    auth: dict[str, str]
    _ids: Iterator[int] = field(default_factory=itertools.count)

    async def request(self, method: str, params: dict[str, Any], name: str | None = None) -> Reply:
        """One JSON-RPC request in the modern era; the classified reply."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
            **self.auth,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        }
        message = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": {**params, "_meta": meta},
        }
        response = await self.http.post(self.url, content=json.dumps(message), headers=headers)
        body = response.json() if response.content else None
        return classify(response.status_code, body)

    async def call(self, tool: str, arguments: dict[str, Any]) -> Reply:
        """tools/call."""
        return await self.request("tools/call", {"name": tool, "arguments": arguments}, tool)


def gateway_for(
    service: Service, http: httpx.AsyncClient, host_id: str, user_id: str, roles: tuple[str, ...]
) -> Gateway:
    """A Gateway client for one user of one host (tokens minted once, valid an hour)."""
    identity = service.identity
    user = identity.user_token(host_id=host_id, user_id=user_id, roles=roles, client_id="portal")
    app = identity.app_token(host_id=host_id)
    return Gateway(http, service.mcp_url, auth_headers(identity, user, app))


def xact_commits(database_url: str) -> int:
    """pg_stat_database.xact_commit of the bench database (after a fresh stats snapshot)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def new_id() -> str:
    """A fresh UUID string."""
    return str(uuid.uuid4())
