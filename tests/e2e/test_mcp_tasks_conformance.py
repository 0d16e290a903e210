"""The official MCP conformance suite's tasks-* scenarios against a real `serve` (issue 35).

npm @modelcontextprotocol/conformance (0.2.0-alpha.12 or later) under Node 22, both installed
by .ci/run into the git-ignored .node/ (skipped with the reason without them). The suite sends
no credentials, so it talks to the service through a loopback proxy that adds a user's and the
Gateway's bearers, as the Gateway would.

Every check must pass, or be reported as not applicable with its reason: the scenarios drive
fixture tools of the suite's own reference server (greet, slow_compute, failing_job,
test_simple_text, test_tool_with_task with MRTR rounds and taskSupport "required"), which the
service does not have; a check that could only run on such a fixture is not applicable here,
and every check that runs on the service itself (the extension advertised, -32021 for
undeclared tasks/*, -32601 for the removed tasks/result and tasks/list, -32602 for an unknown
task id, -32020 for a mismatched Mcp-Method, every message valid against the schema) passes.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from runtime.security.devtools import DevIdentity
from tests.e2e.test_mcp_tasks_node import NODE_DEPS, _node
from tests.support.binding_builders import HOST
from tests.support.server import run_server
from tests.support.tokens import auth_headers

SUITE = NODE_DEPS / "node_modules" / "@modelcontextprotocol" / "conformance"
INSTALL = "npm install --no-save --prefix .node @modelcontextprotocol/conformance@0.2.0-alpha.12"
# What a check says when it could only run on one of the suite's fixture tools.
FIXTURE_ONLY = re.compile(
    r"unknown tool|Not testable|fixture|"
    r"\b(greet|slow_compute|failing_job|test_simple_text|test_tool_with_task)\b"
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.requirement("issue-35:mcp-tasks"),
]


def _suite() -> tuple[str, Path]:
    node = _node()
    if node is None:
        pytest.skip(f"no Node 22 or later (the system's is older or absent; {INSTALL})")
    package = SUITE / "package.json"
    if not package.exists():
        pytest.skip(f"@modelcontextprotocol/conformance is not installed under .node ({INSTALL})")
    return node, SUITE / "dist" / "index.js"


@contextmanager
def bearer_proxy(target: str, headers: dict[str, str]) -> Iterator[str]:
    """A loopback HTTP proxy to target adding headers (the bearers); its /mcp URL."""

    class Forward(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size) if size else b""
            sent = {
                key: value
                for key, value in self.headers.items()
                if key.lower() not in ("host", "content-length", "authorization")
            }
            answer = httpx.request(
                self.command, target, content=body, headers={**sent, **headers}, timeout=60
            )
            self.send_response(answer.status_code)
            for key in ("content-type", "www-authenticate", "allow"):
                if key in answer.headers:
                    self.send_header(key, answer.headers[key])
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_POST = do_GET = do_DELETE = _forward

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _scenarios(node: str, cli: Path) -> list[str]:
    listed = subprocess.run(
        [node, str(cli), "list", "--server"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return re.findall(r"^\s*-\s*(tasks-[a-z0-9-]+)", listed, re.M)


def test_the_conformance_suites_tasks_scenarios_pass_or_need_only_its_fixture_tools(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    node, cli = _suite()
    scenarios = _scenarios(node, cli)
    assert len(scenarios) >= 10, scenarios
    user = live_identity.user_token(
        host_id=HOST, user_id="conformance", roles=("admin", "workflow-admin"), client_id="portal"
    )
    bearers = auth_headers(live_identity, user, live_identity.app_token(host_id=HOST))
    checks: list[dict[str, object]] = []
    with (
        run_server(database_url, tmp_path, live_identity) as server,
        bearer_proxy(server.mcp_url, bearers) as url,
    ):
        for scenario in scenarios:
            out = tmp_path / "results" / scenario
            subprocess.run(
                [node, str(cli), "server", "--url", url, "--scenario", scenario, "-o", str(out)],
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            found = sorted(out.rglob("checks.json"))
            assert found, f"{scenario} saved no checks"
            for path in found:
                for check in json.loads(path.read_text(encoding="utf-8")):
                    checks.append({**check, "scenario": scenario})
    passed = [c["id"] for c in checks if c["status"] == "SUCCESS"]
    not_applicable = {
        c["id"]: c.get("errorMessage") for c in checks
        if c["status"] != "SUCCESS" and FIXTURE_ONLY.search(str(c.get("errorMessage") or ""))
    }  # fmt: skip
    failing = [
        (c["scenario"], c["id"], c.get("errorMessage"))
        for c in checks
        if c["status"] in ("FAILURE", "WARNING") and c["id"] not in not_applicable
    ]
    assert failing == []
    # The checks that run on the service itself.
    for expected in (
        "tasks-extension-advertised",
        "sep-2663-tasks-methods-non-declaring",
        "sep-2663-tasks-result-removed-method-not-found",
        "tasks-removed-tasks-list",
        "sep-2663-tasks-get-invalid-task-id-32602",
        "tasks-headers-reject-mismatched-method",
        "wire-schema-valid",
    ):
        assert expected in passed, (expected, not_applicable)
