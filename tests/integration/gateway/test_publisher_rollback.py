"""`workflow-mcp publish --rollback TOOL` and `--status` drift against a real Workflow."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from publisher.command import EXIT_NOT_PUBLISHED, EXIT_OK
from publisher.spec import derived_id
from runtime.security.devtools import DevIdentity
from tests.support.publisher_harness import (
    AUTHOR,
    as_user,
    call_tool,
    http_targets_server,
    invoke,
    ledger_of,
    publish,
    tools_by_name,
    unique,
    write_logic_tool,
)
from tests.support.server import LiveServer

pytestmark = pytest.mark.requirement("001:Publication, Versioning, And Rollback")


@pytest.fixture(scope="module")
def workflow(
    live_database: str, live_identity: DevIdentity, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """Workflow in a subprocess that accepts http endpoint targets on loopback."""
    directory = tmp_path_factory.mktemp("rollback")
    with http_targets_server(live_database, directory, live_identity) as server:
        yield server


@pytest.fixture
def held() -> Iterator[tuple[str, threading.Event]]:
    """A backend whose GET answers only once the event is set: a run calling it stays in flight."""
    release = threading.Event()

    class Holding(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            release.wait(60)
            body = b'{"held": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Holding)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hold", release
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join()


def _holding_version(directory: Path, namespace: str, tool: str, uri: str) -> None:
    """Version 1.1.0 of the Tool's definition: GET uri (held by the backend), then marker two."""
    definition = {
        "document": {"dsl": "1.0.3", "namespace": namespace, "name": "lookup", "version": "1.1.0"},
        "input": {
            "schema": {
                "format": "json",
                "document": {"type": "object", "properties": {"id": {"type": "string"}}},
            }
        },
        "do": [
            {"hold": {"call": "http", "with": {"method": "GET", "endpoint": uri}}},
            {"answer": {"set": {"marker": "two"}}},
        ],
    }
    (directory / f"{namespace}.yaml").write_text(yaml.safe_dump(definition), encoding="utf-8")
    spec = {"tool": tool, "workflow": f"{namespace}.yaml", "syncWaitMs": 500}
    (directory / f"{tool}.tool.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")


def _structured(result: dict[str, Any]) -> dict[str, Any]:
    return dict(result["structuredContent"])


def test_a_rollback_during_a_run_of_the_newer_revision_moves_the_next_call_and_the_snapshot(
    workflow: LiveServer, tmp_path: Path, held: tuple[str, threading.Event]
) -> None:
    uri, release = held
    directory = tmp_path / "tools"
    namespace = f"rb{unique()}"
    tool = write_logic_tool(directory, namespace, marker="one")
    first = publish(directory, workflow)
    assert first.code == EXIT_OK, first.out + first.err
    older = tools_by_name(first.router)[tool]
    _holding_version(directory, namespace, tool, uri)
    second = publish(directory, workflow)
    assert second.code == EXIT_OK, second.out + second.err
    newer = tools_by_name(second.router)[tool]
    assert newer.workflow_version == "1.1.0"
    # The run of 1.1.0 is admitted and held at its GET: in flight through the rollback.
    # A caller who may read the run afterwards (its disclosure ceiling is set at acceptance).
    reader = ("admin", "workflow-admin")
    pending = _structured(invoke(workflow, newer, {"id": "a"}, roles=reader))
    assert pending["error"]["code"] == "WORKFLOW_TIMEOUT", pending
    instance = pending["workflowInstanceId"]
    options = ("--rollback", tool, "--reason", "1.1.0 hangs on its backend")
    rolled = publish(directory, workflow, options=options)
    assert rolled.code == EXIT_OK, rolled.out + rolled.err
    assert "Rolled back to version 1.0.0" in rolled.out
    entry = tools_by_name(rolled.router)[tool]
    assert entry.workflow_version == "1.0.0"
    assert entry.binding_digest == older.binding_digest
    assert entry.definition_digest == older.definition_digest
    assert entry.input_schema == older.input_schema
    assert entry.roles == older.roles
    assert ledger_of(directory).data.tools[tool].binding_digest == older.binding_digest
    # The next call through the new snapshot runs the restored revision; the old entry's
    # digests no longer match anything Workflow serves.
    after = _structured(invoke(workflow, entry, {"id": "b"}))
    assert after["output"]["marker"] == "one", after
    stale = invoke(workflow, newer, {"id": "c"})
    assert stale["isError"] is True
    assert stale["structuredContent"]["error"]["code"] == "WORKFLOW_DEFINITION_MISMATCH"
    release.set()
    headers = as_user(workflow, AUTHOR, roles=reader)
    waited = _structured(
        call_tool(workflow, "workflow_wait_result", {"workflowInstanceId": instance}, headers)
    )
    assert waited["state"] == "COMPLETED", waited
    assert waited["output"]["marker"] == "two"
    assert waited["definitionDigest"] == newer.definition_digest
    status = publish(directory, workflow, options=("--status",))
    assert status.code == EXIT_OK, status.out + status.err
    assert "no drift" in status.out


def test_a_refused_rollback_exits_1_and_leaves_the_snapshot(
    workflow: LiveServer, tmp_path: Path
) -> None:
    directory = tmp_path / "tools"
    tool = write_logic_tool(directory, f"rb{unique()}")
    first = publish(directory, workflow)
    assert first.code == EXIT_OK, first.out + first.err
    before = first.router_path.read_text(encoding="utf-8")
    refused = publish(directory, workflow, options=("--rollback", tool, "--reason", "why not"))
    assert refused.code == EXIT_NOT_PUBLISHED
    assert "WORKFLOW_STATE_CONFLICT" in refused.err
    assert "no earlier approved revision" in refused.err
    assert first.router_path.read_text(encoding="utf-8") == before


def test_status_exits_1_and_names_the_drift_of_an_acknowledged_tool(
    workflow: LiveServer, tmp_path: Path
) -> None:
    directory = tmp_path / "tools"
    suffix = unique()
    inner = write_logic_tool(directory, f"inner{suffix}")
    pinned = {
        "nestedToolId": derived_id("tool", inner),
        "nestedToolVersion": "0.9.0",
        "contractDigest": "sha256:" + "c" * 64,
        "authorizationToolName": inner,
        "dispatchTarget": inner,
        "toolAnnotations": {"readOnly": True, "destructive": False},
    }
    outer = write_logic_tool(directory, f"outer{suffix}", dependencies=[pinned])
    run = publish(directory, workflow)
    assert run.code == EXIT_OK, run.out + run.err
    status = publish(directory, workflow, options=("--status",))
    assert status.code == EXIT_NOT_PUBLISHED, status.out + status.err
    drift = [line for line in status.out.splitlines() if line.startswith("drift ")]
    assert len(drift) == 1, status.out
    assert f"{outer}: dependencyVersion {derived_id('tool', inner)}" in drift[0]
    assert "pins version 0.9.0" in drift[0] and "version 1.0.0 active" in drift[0]
