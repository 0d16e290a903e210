"""`workflow-mcp serve` outside a terminal: every line it writes to stderr is one JSON object."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.support.server import run_server


@pytest.mark.requirement("001:Observability And Audit")
async def test_serve_writes_only_json_lines_to_a_non_terminal_stderr_from_start_to_shutdown(
    database_url: str, tmp_path: Path, dev_identity: DevIdentity
) -> None:
    stderr_path = tmp_path / "stderr.log"
    with run_server(database_url, tmp_path, dev_identity, stderr_path=stderr_path) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
            assert (await http.get("/healthz")).status_code == 200
            reply = await http.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={**server.auth_headers(), "Accept": "application/json"},
            )
            assert reply.status_code == 200
    lines = [line for line in stderr_path.read_text(encoding="utf-8").splitlines() if line]
    # Start-up and shutdown lines of the HTTP server are among them, as JSON too.
    assert any(json.loads(line)["logger"].startswith("uvicorn") for line in lines), lines
    for line in lines:
        assert isinstance(json.loads(line), dict), line
    # A clean shutdown is no lost connection.
    assert not any("lost its connection" in line for line in lines), lines
