"""Pieces of the outbound hostile tests (no tests here): a backend, a driven resolver, Tools.

The backend answers a claim summary, a root /summary that a `..` would reach, gzip bodies and
a gzip bomb; the resolver answers whatever the test says a name resolves to, one answer per
lookup, so a test can rebind a name between publication and the connection.
"""

from __future__ import annotations

import functools
import gzip
import ipaddress
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from runtime.addresses import IPAddress
from runtime.canonical import definition_digest
from runtime.collaborators import Services
from tests.support.binding_builders import endpoint_target, new_id, publish_args
from tests.support.execution import Receive, Send, read_body
from tests.support.invocation import Tool, binding, ok, publish_version, save_head
from tests.support.mcp import McpTestClient

SUMMARY_JSON = {"claim": "C-1001", "lines": ["line"] * 2000}
COMMUNICATION = "https://serverlessworkflow.io/spec/1.0.0/errors/communication"
# 64 MiB of zeros: about 64 KiB of gzip on the wire, far past the 1 MiB response bound.
BOMB_BYTES = 64 << 20


@functools.cache
def gzip_bomb() -> bytes:
    """BOMB_BYTES of zeros as one gzip member, compressed a megabyte at a time."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\0" * (1 << 20)
    parts = [compressor.compress(chunk) for _ in range(BOMB_BYTES >> 20)]
    return b"".join(parts) + compressor.flush()


@dataclass
class OutboundBackend:
    """An ASGI backend on 127.0.0.1 recording every request it gets."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        """The backend's origin."""
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        headers = {key.decode(): value.decode() for key, value in scope["headers"]}
        path = scope["path"]
        self.requests.append({"method": scope["method"], "path": path, "headers": headers})
        if path == "/gzip":
            await _reply(send, gzip.compress(json.dumps(SUMMARY_JSON).encode()), gzip=True)
        elif path == "/bomb":
            await _reply(send, gzip_bomb(), gzip=True)
        elif path == "/summary":
            await _reply(send, json.dumps({"secret": "every claim"}).encode())
        else:
            await _reply(send, json.dumps({"path": path}).encode())


async def _reply(send: Send, body: bytes, *, gzip: bool = False) -> None:
    headers = [(b"content-type", b"application/json")]
    if gzip:
        headers.append((b"content-encoding", b"gzip"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass
class DrivenResolver:
    """Answers lookups from a script: each name's answers are used in order, the last repeats."""

    answers: dict[str, list[list[str]]] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)

    def answer(self, name: str, *addresses: list[str]) -> None:
        """Script the answers to the next lookups of name (one list of addresses per lookup)."""
        self.answers[name] = list(addresses)

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """The next scripted answer for host; OSError for a name without a script."""
        self.lookups.append(host)
        script = self.answers.get(host)
        if not script:
            raise OSError(f"{host} does not resolve")
        current = script.pop(0) if len(script) > 1 else script[0]
        return [ipaddress.ip_address(address) for address in current]


def allow_http(services: Services, *networks: str) -> None:
    """Plain-http targets (the backend's), and exactly these internal networks."""
    destinations = services.settings.publication.destinations
    destinations.allowed_schemes = ["http", "https"]
    destinations.allowed_networks = list(networks)


def http_definition(endpoint: str) -> str:
    """One GET of endpoint (a URI template over the input's keys); its content is the output."""
    return (
        'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
        '  version: "1.2.0"\n'
        "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
        "do:\n  - fetch:\n      call: http\n      with:\n        method: GET\n"
        f"        endpoint: {endpoint}\n"
    )


def reason_definition(endpoint: str) -> str:
    """GET endpoint; a communication error becomes the output {reason: the error's detail}."""
    return (
        'document:\n  dsl: "1.0.3"\n  namespace: claims\n  name: summarize-claim\n'
        '  version: "1.2.0"\n'
        "input:\n  schema:\n    format: json\n    document:\n      type: object\n"
        "do:\n  - guarded:\n      try:\n        - fetch:\n            call: http\n"
        f"            with:\n              method: GET\n              endpoint: {endpoint}\n"
        "      catch:\n        errors:\n          with:\n"
        f"            type: {COMMUNICATION}\n"
        "        as: err\n        do:\n          - record:\n              set:\n"
        "                reason: ${ err.detail }\n"
    )


@dataclass(frozen=True)
class Publication:
    """A binding publish of a workflow over endpoint targets: the ids and the MCP result."""

    wf_def_id: str
    tool_id: str
    text: str
    result: dict[str, Any]


async def publish_target_binding(
    owner: McpTestClient, text: str, targets: list[str]
) -> Publication:
    """Save and publish text, then publish a binding reaching targets."""
    wf_def_id, tool_id = new_id(), new_id()
    await save_head(owner, wf_def_id, text)
    await publish_version(owner, wf_def_id, text, "1.2.0")
    reach = [endpoint_target(f"t{index}", uri) for index, uri in enumerate(targets)]
    args = publish_args(binding(wf_def_id, tool_id, text), 0, endpoint_targets=reach)
    result = await owner.call_tool("workflow_binding_publish", args)
    return Publication(wf_def_id, tool_id, text, result)


async def publish_http_tool(owner: McpTestClient, endpoint: str, text: str | None = None) -> Tool:
    """An active Tool whose workflow (text, else one GET) calls endpoint, its one target."""
    text = text if text is not None else http_definition(endpoint)
    published = await publish_target_binding(owner, text, [endpoint])
    receipt = ok(published.result)
    assert receipt["status"] == "active", receipt
    return Tool(
        tool_id=published.tool_id,
        wf_def_id=published.wf_def_id,
        binding_id=receipt["bindingId"],
        binding_digest=receipt["bindingDigest"],
        definition_digest=definition_digest(published.text),
        aggregate_version=receipt["aggregateVersion"],
        text=published.text,
    )
