"""Run `workflow-mcp publish` in-process against a live server, and faults for its calls."""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateway.router import RoutedTool, RouterSnapshot, load_snapshot
from publisher.command import run_publish
from publisher.ledger import Ledger
from runtime.security.devtools import DEV_HOST_ID, DevIdentity
from tests.support.server import REPO_ROOT, LiveServer, run_server
from tests.support.tokens import auth_headers
from workflow_mcp.cli import build_parser

EXAMPLES = REPO_ROOT / "examples"
OWNER = "alice"
AUTHOR = "bob"


@dataclass
class Published:
    """One run of the command: exit code, stdout, stderr and the router it wrote."""

    code: int
    out: str
    err: str
    router_path: Path

    @property
    def router(self) -> RouterSnapshot:
        """The mcp-router.yml the run wrote."""
        return load_snapshot(self.router_path)

    def row(self, tool: str) -> str:
        """The result-table line of one Tool."""
        for line in self.out.splitlines():
            if line.startswith(tool + " "):
                return line
        raise AssertionError(f"no row for {tool} in:\n{self.out}")


def publish(
    directory: Path,
    server: LiveServer,
    *,
    user: str = OWNER,
    options: tuple[str, ...] = (),
    transport: httpx.BaseTransport | None = None,
    url: str | None = None,
    through_gateway: bool = False,
) -> Published:
    """`workflow-mcp publish DIR` as user (role admin): straight at Workflow with a scope token,
    or (through_gateway) at url with the user bearer alone."""
    token = server.identity.user_token(host_id=DEV_HOST_ID, user_id=user, roles=("admin",))
    router = directory.parent / "mcp-router.yml"
    argv = ["publish", str(directory), "--url", url or server.mcp_url, "--router", str(router)]
    argv += ["--token", token]
    if not through_gateway:
        argv += ["--scope-token", server.identity.app_token(host_id=DEV_HOST_ID)]
    args = build_parser().parse_args([*argv, *options])
    out, err = io.StringIO(), io.StringIO()
    code = run_publish(args, transport=transport, out=out, err=err)
    return Published(code, out.getvalue(), err.getvalue(), router)


SCHEMES_ENV = "WORKFLOW_PUBLICATION_DESTINATIONS_ALLOWED_SCHEMES"


@contextmanager
def http_targets_server(
    database_url: str, directory: Path, identity: DevIdentity
) -> Iterator[LiveServer]:
    """Workflow in a subprocess that accepts http endpoint targets on loopback.

    The scheme setting reaches the child through the environment, set only while it starts.
    """
    previous = os.environ.get(SCHEMES_ENV)
    os.environ[SCHEMES_ENV] = '["http", "https"]'
    try:
        context = run_server(database_url, directory, identity)
        server = context.__enter__()
    finally:
        if previous is None:
            os.environ.pop(SCHEMES_ENV, None)
        else:
            os.environ[SCHEMES_ENV] = previous
    try:
        yield server
    finally:
        context.__exit__(None, None, None)


def ledger_of(directory: Path) -> Ledger:
    """The directory's ledger as the last run left it."""
    return Ledger.open(directory)


def copy_examples(target: Path) -> Path:
    """The examples' YAML files in a fresh directory (its ledger stays out of the repo)."""
    directory = target / "examples"
    directory.mkdir(parents=True)
    for path in EXAMPLES.glob("*.yaml"):
        shutil.copy(path, directory / path.name)
    return directory


def unique() -> str:
    """A short suffix that keeps names of one test apart from every other test's."""
    return uuid.uuid4().hex[:8]


def write_logic_tool(
    directory: Path,
    namespace: str,
    *,
    tool: str | None = None,
    version: str = "1.0.0",
    marker: str = "one",
    owner: str | None = None,
    **spec: Any,
) -> str:
    """A pure-logic definition and a Tool spec pinning it; returns the Tool name."""
    directory.mkdir(parents=True, exist_ok=True)
    name = tool or f"{namespace}.lookup"
    definition = {
        "document": {"dsl": "1.0.3", "namespace": namespace, "name": "lookup", "version": version},
        "input": {
            "schema": {
                "format": "json",
                "document": {"type": "object", "properties": {"id": {"type": "string"}}},
            }
        },
        "do": [{"answer": {"set": {"marker": marker, "id": "${ .id }"}}}],
    }
    (directory / f"{namespace}.yaml").write_text(yaml.safe_dump(definition), encoding="utf-8")
    document: dict[str, Any] = {"tool": name, "workflow": f"{namespace}.yaml", **spec}
    if owner is not None:
        document["definitionOwner"] = {"userId": owner}
    (directory / f"{name}.tool.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    return name


@dataclass
class DropResponses(httpx.BaseTransport):
    """Sends each request for real; for the ones `drop` selects, reads the answer and then
    fails as if the connection died: Workflow did the work, the publisher never hears."""

    drop: Callable[[dict[str, Any]], bool]
    dropped: list[dict[str, Any]] = field(default_factory=list)
    inner: httpx.HTTPTransport = field(default_factory=httpx.HTTPTransport)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Forward; drop the response when selected."""
        message = json.loads(request.content)
        response = self.inner.handle_request(request)
        if not self.drop(message):
            return response
        response.read()
        response.close()
        self.dropped.append(message)
        raise httpx.ReadError("connection closed before the response", request=request)


def calls_to(tool: str, *, times: int = 1) -> Callable[[dict[str, Any]], bool]:
    """A drop predicate for the first `times` calls of one Workflow tool."""
    seen = {"count": 0}

    def select(message: dict[str, Any]) -> bool:
        if message.get("params", {}).get("name") != tool or seen["count"] >= times:
            return False
        seen["count"] += 1
        return True

    return select


def invoke(
    server: LiveServer,
    entry: RoutedTool,
    data: dict[str, Any],
    *,
    user: str = AUTHOR,
    roles: tuple[str, ...] = ("user",),
) -> dict[str, Any]:
    """workflow_invoke as the Gateway sends it for a routed Tool; the CallToolResult.

    roles: the caller's; a run discloses its status and result only to what they allowed.
    """
    token = server.identity.user_token(host_id=DEV_HOST_ID, user_id=user, roles=roles)
    headers = auth_headers(server.identity, token, server.identity.app_token(host_id=DEV_HOST_ID))
    headers["MCP-Protocol-Version"] = "2025-11-25"
    arguments = {
        "stableToolRef": entry.stable_tool_ref,
        "expectedBindingDigest": entry.binding_digest,
        "expectedDefinitionDigest": entry.definition_digest,
        "input": data,
    }
    return call_tool(server, "workflow_invoke", arguments, headers)


def call_tool(
    server: LiveServer, tool: str, arguments: dict[str, Any], headers: dict[str, str]
) -> dict[str, Any]:
    """One tools/call straight at Workflow; the CallToolResult."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}  # fmt: skip
    all_headers = {
        "MCP-Protocol-Version": "2025-11-25",
        "Content-Type": "application/json",
        **headers,
    }
    reply = httpx.post(server.mcp_url, content=json.dumps(body), headers=all_headers, timeout=60)
    body = reply.json()
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def as_user(server: LiveServer, user: str, roles: tuple[str, ...] = ("admin",)) -> dict[str, str]:
    """Authorization and X-Scope-Token headers of a user of the development host."""
    token = server.identity.user_token(host_id=DEV_HOST_ID, user_id=user, roles=roles)
    return auth_headers(server.identity, token, server.identity.app_token(host_id=DEV_HOST_ID))


class _StubHandler(BaseHTTPRequestHandler):
    calls: list[dict[str, Any]]

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        message = json.loads(self.rfile.read(length) or b"{}")
        if "id" not in message:
            self.send_response(202)
            self.end_headers()
            return
        if message.get("method") == "tools/call":
            type(self).calls.append(message["params"])
            result: dict[str, Any] = {
                "content": [{"type": "text", "text": '{"ok":true}'}],
                "structuredContent": {"ok": True},
                "isError": False,
            }
        else:
            result = {"protocolVersion": "2025-11-25", "capabilities": {},
                      "serverInfo": {"name": "stub", "version": "1"}}  # fmt: skip
        data = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@contextmanager
def stub_gateway() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A Gateway stand-in answering every nested tools/call; yields its URL and the calls."""
    calls: list[dict[str, Any]] = []
    handler = type("StubHandler", (_StubHandler,), {"calls": calls})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", calls
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def operation(operation_id: str) -> Callable[[dict[str, Any]], bool]:
    """A drop predicate for every send of one operation."""

    def select(message: dict[str, Any]) -> bool:
        arguments = message.get("params", {}).get("arguments", {})
        return bool(arguments.get("operationId") == operation_id)

    return select


def tools_by_name(snapshot: RouterSnapshot) -> dict[str, RoutedTool]:
    """The snapshot's Tools keyed by their Gateway-facing name."""
    return {tool.name: tool for tool in snapshot.tools}
