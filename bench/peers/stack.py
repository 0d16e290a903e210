"""The processes of bench-peers beside bench.harness's service: the Gateway and the DBOS peer.

Each runs as its own child process group on 127.0.0.1 (so its CPU is read from /proc apart from
the driver's) and is stopped when its context exits, also on failure or Ctrl-C.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec
import psycopg
import yaml

from bench.harness import MODERN, REPO, Service, _spawn, _stop, free_port
from bench.workload import DECIDE_INPUT_SCHEMA, Tool
from gateway.router import RoutedTool, RouterSnapshot, write_snapshot

START_TIMEOUT_S = 90.0
PEER_DATABASE = "bench_dbos"
DEFAULT_PEER_PYTHON = REPO / ".bench-peers-venv" / "bin" / "python"
SYNC_WAIT_MS = 20_000


@dataclass(frozen=True)
class Process:
    """A running child server: where its MCP endpoint is, its pid and its log."""

    name: str
    mcp_url: str
    pid: int
    log_path: Path

    def log_tail(self, limit: int = 3000) -> str:
        """The end of the process's output."""
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""


def routed(name: str, tool: Tool) -> RoutedTool:
    """The router entry of one published decide Tool, built from its binding receipt."""
    return RoutedTool(
        name=name,
        stable_tool_ref=tool.tool_id,
        workflow_definition_id=tool.wf_def_id,
        workflow_version="1.0.0",
        definition_digest=tool.definition_digest,
        binding_digest=tool.binding_digest,
        input_schema=DECIDE_INPUT_SCHEMA,
        sync_wait_ms=SYNC_WAIT_MS,
        maximum_request_bytes=65536,
        annotations={"readOnlyHint": True, "destructiveHint": False},
    )


def _wait(process: Process, probe: Callable[[], bool], child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"{process.name} exited:\n{process.log_tail()}")
        try:
            if probe():
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{process.name} not ready after {START_TIMEOUT_S}s:\n{process.log_tail()}")


@contextmanager
def running_gateway(service: Service, host_id: str, tools: dict[str, Tool]) -> Iterator[Process]:
    """`workflow-mcp gateway` serving `tools` (name -> Tool) in front of service."""
    directory = Path(tempfile.mkdtemp(prefix="wf-bench-gateway-"))
    router = directory / "mcp-router.yml"
    write_snapshot(router, RouterSnapshot(tools=tuple(routed(n, t) for n, t in tools.items())))
    token = directory / "gateway-app-token"
    # One static application bearer: one Gateway token serves one host (docs/OPERATIONS.md).
    token.write_text(service.identity.app_token(host_id=host_id, ttl=6 * 3600), encoding="ascii")
    port = free_port()
    config = {
        "security": msgspec.to_builtins(service.identity.settings()),
        "gateway": {
            "host": "127.0.0.1",
            "port": port,
            "router_file": str(router),
            "workflow_url": service.mcp_url,
            "app_token_file": str(token),
        },
    }
    path = directory / "gateway.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=True), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKFLOW_")}
    env["PYTHONUNBUFFERED"] = "1"
    argv = [str(REPO / ".venv" / "bin" / "python"), "-m", "runtime.cli", "gateway"]
    child = _spawn([*argv, "--config", str(path)], env, directory / "gateway.log")
    process = Process(
        "gateway", f"http://127.0.0.1:{port}/mcp", child.pid, directory / "gateway.log"
    )
    try:
        _wait(
            process, lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200, child
        )
        yield process
    finally:
        _stop(child)
        shutil.rmtree(directory, ignore_errors=True)


def peer_database(database_url: str) -> str:
    """Create the DBOS system database in the same cluster; its URL."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {PEER_DATABASE}")
        conn.execute(f"CREATE DATABASE {PEER_DATABASE}")
    parts = urlsplit(database_url)
    return urlunsplit(parts._replace(path=f"/{PEER_DATABASE}"))


def _peer_answers(url: str) -> bool:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench-peers", "version": "1"},
    }
    # The 2026-07-28 era has no ping: tools/list is the cheapest request that proves it serves.
    body = {"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": meta}}
    return httpx.post(url, json=body, headers=headers, timeout=2.0).status_code == 200


@contextmanager
def running_peer(python: Path, database_url: str, tools: int, pool_size: int) -> Iterator[Process]:
    """The DBOS peer (bench/peers/dbos_server.py) in its own venv, on its own database."""
    if not python.exists():
        raise RuntimeError(f"{python} is missing: run `make bench-peers` (it builds the peer venv)")
    directory = Path(tempfile.mkdtemp(prefix="wf-bench-peer-"))
    port = free_port()
    argv = [
        str(python), str(REPO / "bench" / "peers" / "dbos_server.py"), "--port", str(port),
        "--database-url", peer_database(database_url), "--tools", str(tools),
        "--pool-size", str(pool_size),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    child = _spawn(argv, dict(env, PYTHONUNBUFFERED="1"), directory / "peer.log")
    process = Process("dbos", f"http://127.0.0.1:{port}/mcp", child.pid, directory / "peer.log")
    try:
        _wait(process, lambda: _peer_answers(process.mcp_url), child)
        yield process
    finally:
        _stop(child)
        shutil.rmtree(directory, ignore_errors=True)
