"""The official MCP conformance suite's tasks-* scenarios against the reference Gateway (issue 35).

npm @modelcontextprotocol/conformance (0.2.0-alpha.12 or later) under Node 22, both installed
by .ci/run into the git-ignored .node/ (skipped with the reason without them). Workflow
(`serve`) and the Gateway (`workflow-mcp gateway`) run as processes; the Gateway serves the
suite's fixture tools as a route set (tests.support.conformance_routes): `greet` and
`test_simple_text` as published sync Tools, the task tools as task-started routes of saved
definitions. The suite sends no credentials, so it talks to the Gateway through a loopback
proxy that adds a user's bearers, as an MCP client of the Gateway would send them.

Every check must pass, or be one of NOT_APPLICABLE below, each with its reason and the failure
it must show (so a different failure of the same check still fails the test).

A second run points the scenarios that hold the protocol-level checks straight at `serve`
(through the same kind of proxy, with the Gateway's bearer too): Workflow's own MCP endpoint,
which MCP clients may also use, must pass those checks as well. It has no fixture tools, so
only the checks that need none are asserted there; the Gateway run covers the rest.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from runtime.security.devtools import DEV_HOST_ID, DevIdentity
from tests.e2e.test_mcp_tasks_node import NODE_DEPS, _node
from tests.support.binding_builders import HOST
from tests.support.conformance_routes import ASK_ROLE, add_start_routes, publish_sync_tools
from tests.support.gateway import run_gateway
from tests.support.server import run_server
from tests.support.tokens import auth_headers

SUITE = NODE_DEPS / "node_modules" / "@modelcontextprotocol" / "conformance"
INSTALL = "npm install --no-save --prefix .node @modelcontextprotocol/conformance@0.2.0-alpha.12"

# check id: (why it cannot pass here, what its failure must say).
NOT_APPLICABLE: dict[str, tuple[str, str]] = {
    "sep-2663-tasks-get-status-failed": (
        "protocol_error_job panics into a JSON-RPC error inside the task; a workflow run ends "
        "completed (isError when the run failed) or cancelled and never produces a protocol "
        "error, so the route set has no such tool",
        "protocol_error_job MUST create a task",
    ),
    "tasks-mrtr-partial-fulfillment": (
        "multi_input keeps two inputRequests pending at once; a run waits on one ask at a time "
        "(an ask in a fork branch is refused at publication: a parked run resumes by replaying "
        "its top-level task in order), so the route set has no such tool",
        "multi_input did not create a task",
    ),
    "tasks-status-notifications": (
        "the suite skips the scenario itself, pending its subscriptions/listen rewrite",
        "Skipped:",
    ),
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.requirement("issue-35:mcp-tasks"),
    pytest.mark.requirement("issue-35:task-started-routes"),
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


def _run(node: str, cli: Path, url: str, scenario: str, out: Path) -> list[dict[str, object]]:
    subprocess.run(
        [node, str(cli), "server", "--url", url, "--scenario", scenario, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    found = sorted(out.rglob("checks.json"))
    assert found, f"{scenario} saved no checks"
    return [
        {**check, "scenario": scenario}
        for path in found
        for check in json.loads(path.read_text(encoding="utf-8"))
    ]


def test_the_suites_tasks_scenarios_pass_against_the_gateways_conformance_route_set(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    node, cli = _suite()
    scenarios = _scenarios(node, cli)
    assert len(scenarios) >= 10, scenarios
    user = live_identity.user_token(
        host_id=DEV_HOST_ID, user_id="conformance", roles=("admin", ASK_ROLE), client_id="portal"
    )
    bearers = auth_headers(live_identity, user, live_identity.app_token(host_id=DEV_HOST_ID))
    checks: list[dict[str, object]] = []
    (tmp_path / "workflow").mkdir()
    with run_server(database_url, tmp_path / "workflow", live_identity) as server:
        router_file = publish_sync_tools(tmp_path, server)
        add_start_routes(server, router_file)
        with (
            run_gateway(
                tmp_path / "gateway", live_identity, server.mcp_url, router_file,
                host_id=DEV_HOST_ID,
            ) as gateway,
            bearer_proxy(gateway.mcp_url, bearers) as url,
        ):  # fmt: skip
            for scenario in scenarios:
                checks += _run(node, cli, url, scenario, tmp_path / "results" / scenario)
    counts: Counter[tuple[str, str]] = Counter()
    failing = []
    for check in checks:
        scenario, check_id = str(check["scenario"]), str(check["id"])
        if check["status"] == "SUCCESS":
            counts[scenario, "pass"] += 1
            continue
        reason = NOT_APPLICABLE.get(check_id)
        if reason is not None and reason[1] in str(check.get("errorMessage") or ""):
            counts[scenario, "n/a"] += 1
            continue
        failing.append((scenario, check_id, check["status"], check.get("errorMessage")))
    for scenario in scenarios:
        print(f"{scenario}: {counts[scenario, 'pass']} pass, {counts[scenario, 'n/a']} n/a")
    assert failing == []
    # Each not-applicable check was run and showed the failure its reason explains.
    observed = {str(check["id"]) for check in checks if check["status"] != "SUCCESS"}
    assert observed == set(NOT_APPLICABLE)
    # The checks on the fixture tools themselves ran and passed through the Gateway.
    passed = {str(check["id"]) for check in checks if check["status"] == "SUCCESS"}
    for expected in (
        "tasks-sync-tool-call",
        "sep-2663-result-type-task-on-create",
        "sep-2663-tasks-get-status-completed",
        "sep-2663-tool-error-uses-completed-status",
        "sep-2663-cancel-ack-empty-result",
        "sep-2663-tasks-get-status-input-required",
        "tasks-mrtr-tasks-update-resumes",
        "sep-2663-server-returns-missing-capability-when-required",
        "sep-2663-mrtr-synchronous-before-task-creation",
        "wire-schema-valid",
    ):
        assert expected in passed, expected


# The scenarios holding the checks that need no fixture tool, and those checks.
PROTOCOL_SCENARIOS = (
    "tasks-capability-negotiation",
    "tasks-dispatch-and-envelope",
    "tasks-request-headers",
)
PROTOCOL_CHECKS = (
    "tasks-extension-advertised",
    "sep-2663-tasks-methods-non-declaring",
    "sep-2663-tasks-result-removed-method-not-found",
    "tasks-removed-tasks-list",
    "sep-2663-tasks-get-invalid-task-id-32602",
    "tasks-headers-reject-mismatched-method",
    "wire-schema-valid",
)


def test_workflows_own_endpoint_passes_the_suites_protocol_level_tasks_checks(
    database_url: str, live_identity: DevIdentity, tmp_path: Path
) -> None:
    node, cli = _suite()
    user = live_identity.user_token(
        host_id=HOST, user_id="conformance", roles=("admin", "workflow-admin"), client_id="portal"
    )
    bearers = auth_headers(live_identity, user, live_identity.app_token(host_id=HOST))
    checks: list[dict[str, object]] = []
    with (
        run_server(database_url, tmp_path, live_identity) as server,
        bearer_proxy(server.mcp_url, bearers) as url,
    ):
        for scenario in PROTOCOL_SCENARIOS:
            checks += _run(node, cli, url, scenario, tmp_path / "results" / scenario)
    failed = {
        str(check["id"]): check.get("errorMessage")
        for check in checks
        if check["id"] in PROTOCOL_CHECKS and check["status"] != "SUCCESS"
    }
    assert failed == {}
    assert {str(check["id"]) for check in checks} >= set(PROTOCOL_CHECKS)
