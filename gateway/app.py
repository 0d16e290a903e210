"""The Gateway's HTTP surface (litestar): POST /mcp in both MCP eras, /healthz, OAuth metadata.

The MCP framing, era negotiation, header checks and error shapes are the service's own
(runtime/mcp); only the Tools differ: each request gets the caller's filtered list and the
Gateway's tools/call against the snapshot current at its arrival.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec
from litestar import Litestar, Request, Response, asgi, get, post, route
from litestar.datastructures import State

from gateway.acl import RelayAcl, listed_routed
from gateway.caller import CallerVerifier, RequestCaller
from gateway.calls import GatewayCalls
from gateway.console_relay import PREFIX as CONSOLE_PREFIX
from gateway.console_relay import ConsoleRelay
from gateway.credentials import app_token_source
from gateway.listing import CallerTools
from gateway.relay import WorkflowClient
from gateway.routed import PreparedTool, prepare
from gateway.router import RouterSnapshot
from gateway.settings import GatewayConfig
from gateway.snapshot import SnapshotWatcher
from gateway.starts import PreparedStart, listed_starts, prepare_start
from gateway.tasks import GatewayTasks
from runtime.errors import AuthenticationError
from runtime.mcp import (
    INVALID_REQUEST,
    METADATA_PATH,
    BearerGate,
    HttpReply,
    JsonRpcFault,
    McpServer,
    duplicate_credential_fault,
    is_json_content_type,
    origin_allowed,
    resource_metadata,
    unsupported_media_fault,
    with_resource_metadata,
)
from runtime.security import Authenticator, DevIdentity, KeySet

MAX_BODY_BYTES = 1024 * 1024
JSON = "application/json"
SERVER_INFO = {"name": "workflow-mcp-gateway", "version": "0.1.0"}
INSTRUCTIONS = (
    "Workflow-backed Tools: call a Tool with its arguments and get the workflow's output; "
    "a WORKFLOW_TIMEOUT result names the running instance and a retry re-attaches to it."
)


@dataclass
class Gateway:
    """The process's collaborators: snapshot, verifiers, ACL and the Workflow client."""

    settings: GatewayConfig
    watcher: SnapshotWatcher
    verifier: CallerVerifier
    gate: BearerGate
    acl: RelayAcl
    client: WorkflowClient
    # /console relayed to Workflow's console (issue 39).
    console: ConsoleRelay
    # The snapshot last served and its Tools by name, input schemas compiled.
    _prepared: tuple[RouterSnapshot | None, dict[str, PreparedTool]] = field(
        default_factory=lambda: (None, {}), init=False, repr=False
    )
    # Its start routes by name, likewise (issue 35).
    _starts: tuple[RouterSnapshot | None, dict[str, PreparedStart]] = field(
        default_factory=lambda: (None, {}), init=False, repr=False
    )

    def prepared(self, snapshot: RouterSnapshot) -> dict[str, PreparedTool]:
        """snapshot's Tools by name, prepared once per snapshot (a reload prepares anew)."""
        held, tools = self._prepared
        if held is not snapshot:
            tools = {tool.name: prepare(tool) for tool in snapshot.tools}
            self._prepared = (snapshot, tools)
        return tools

    def starts(self, snapshot: RouterSnapshot) -> dict[str, PreparedStart]:
        """snapshot's start routes by name, prepared once per snapshot."""
        held, starts = self._starts
        if held is not snapshot:
            starts = {route.name: prepare_start(route) for route in snapshot.starts}
            self._starts = (snapshot, starts)
        return starts

    def server_for(self, headers: Mapping[str, str]) -> McpServer:
        """The MCP server of one request: the caller's Tools, the current snapshot."""
        snapshot = self.watcher.current()
        caller = RequestCaller(self.verifier, headers)

        def listed() -> list[dict[str, Any]]:
            try:
                verified = caller.get()
            except AuthenticationError:
                return []  # the gate (tools/list) answers 401 first
            return (
                listed_routed(verified, snapshot.tools)
                + listed_starts(verified, snapshot.starts)
                + self.acl.listed_for(verified)
            )

        section = self.settings.gateway
        timeout_s = section.relay_timeout_ms / 1000
        starts = self.starts(snapshot)
        calls = GatewayCalls(
            self.prepared(snapshot), caller, self.acl, self.client, timeout_s, starts
        )
        return McpServer(
            CallerTools(listed),
            calls,
            page_size=section.tools_list_page_size,
            list_ttl_ms=section.tools_list_ttl_ms,
            gate=self.gate,
            server_info=SERVER_INFO,
            instructions=INSTRUCTIONS,
            list_cache_scope="private",
            tasks=GatewayTasks(caller, self.acl, self.client, timeout_s, starts),
        )


def build_gateway(
    settings: GatewayConfig,
    *,
    identity: DevIdentity | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Gateway:
    """Load the snapshot and keys and wire the Gateway (raises on a bad configuration)."""
    section = settings.gateway
    keyset = KeySet.from_settings(settings.security)
    return Gateway(
        settings=settings,
        watcher=SnapshotWatcher(
            Path(section.router_file), interval_s=section.reload_interval_ms / 1000
        ),
        verifier=CallerVerifier(settings.security, keyset),
        # tools/list needs a user bearer (the list depends on its roles); any bearer that is
        # sent must verify, on every method.
        gate=BearerGate(Authenticator(settings.security, keyset), anonymous_discovery=False),
        acl=RelayAcl(settings.security),
        client=WorkflowClient(
            section.workflow_url, app_token_source(section, identity), transport=transport
        ),
        console=ConsoleRelay(section.workflow_url, transport=transport),
    )


def _headers(request: Request[Any, Any, Any]) -> dict[str, str]:
    return {key.lower(): value for key, value in request.headers.items()}


def _reply(reply: HttpReply, request: Request[Any, Any, Any]) -> Response[bytes]:
    content = b"" if reply.body is None else msgspec.json.encode(reply.body)
    headers = dict(reply.headers)
    if (challenge := headers.get("WWW-Authenticate")) is not None:
        headers["WWW-Authenticate"] = with_resource_metadata(challenge, str(request.base_url))
    return Response(content, status_code=reply.status, media_type=JSON, headers=headers)


def _refusal(request: Request[Any, Any, Any], headers: Mapping[str, str]) -> HttpReply | None:
    origin = headers.get("origin")
    gateway: Gateway = request.app.state.gateway
    if not origin_allowed(origin, gateway.settings.gateway.allowed_origins):
        fault = JsonRpcFault(INVALID_REQUEST, "origin not allowed", http_status=403)
        return HttpReply(403, fault.to_response(None))
    refused = duplicate_credential_fault(request.scope["headers"])
    if refused is None and not is_json_content_type(headers.get("content-type")):
        refused = unsupported_media_fault()
    if refused is None:
        return None
    return HttpReply(refused.http_status, refused.to_response(None), dict(refused.headers))


@post("/mcp", status_code=200)
async def mcp_post(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    """One JSON-RPC message in, one reply out (stateless Streamable HTTP)."""
    headers = _headers(request)
    if (refusal := _refusal(request, headers)) is not None:
        return _reply(refusal, request)
    body = await request.body()
    gateway: Gateway = state.gateway
    return _reply(await gateway.server_for(headers).handle_post(body, headers), request)


@route("/mcp", http_method=["GET", "DELETE"], status_code=405)
async def mcp_other() -> Response[bytes]:
    """No standalone SSE stream and no sessions."""
    return Response(b"", status_code=405, headers={"Allow": "POST"})


@get("/healthz")
async def healthz(state: State) -> dict[str, Any]:
    """Liveness, and how many workflow-backed Tools the current snapshot serves."""
    gateway: Gateway = state.gateway
    return {"status": "ok", "tools": len(gateway.watcher.current().tools)}


@get(METADATA_PATH)
async def protected_resource_get(request: Request[Any, Any, Any], state: State) -> dict[str, Any]:
    """OAuth protected resource metadata (RFC 9728), as MCP authorization asks."""
    gateway: Gateway = state.gateway
    return resource_metadata(str(request.base_url), gateway.settings.security.user_token.issuers)


@asgi(CONSOLE_PREFIX, is_mount=True)
async def console_relay(scope: Any, receive: Any, send: Any) -> None:
    """Workflow's console, relayed (gateway.console_relay)."""
    gateway: Gateway = scope["app"].state.gateway
    await gateway.console(scope, receive, send)


def create_gateway_app(gateway: Gateway) -> Litestar:
    """The ASGI app serving gateway; its Workflow client is closed at shutdown."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await gateway.client.aclose()
            await gateway.console.aclose()

    app = Litestar(
        route_handlers=[mcp_post, mcp_other, healthz, protected_resource_get, console_relay],
        lifespan=[lifespan],
        request_max_body_size=MAX_BODY_BYTES,
        debug=False,
        logging_config=None,
    )
    app.state.gateway = gateway
    return app
