"""The HTTP surface: POST /mcp, POST /tools/{name}, health and readiness (litestar)."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, cast

import msgspec
from litestar import Litestar, Request, Response, get, post, route
from litestar.datastructures import State

from generated.routes import ROUTES
from generated.tools import ToolName
from runtime.collaborators import Services
from runtime.mcp.bearer_gate import BearerGate
from runtime.mcp.call import ToolHandler
from runtime.mcp.dispatch import ToolDispatcher
from runtime.mcp.http_checks import (
    duplicate_credential_fault,
    is_json_content_type,
    unsupported_media_fault,
)
from runtime.mcp.jsonrpc import INVALID_REQUEST, JsonRpcFault, decode_arguments, decoded_before
from runtime.mcp.origins import origin_allowed
from runtime.mcp.protected_resource import METADATA_PATH, resource_metadata, with_resource_metadata
from runtime.mcp.server import HttpReply, McpServer
from runtime.mcp.tasks import TaskService
from runtime.mcp.tools import ToolRegistry, ToolRoute
from runtime.telemetry import metrics

log = logging.getLogger("workflow.http")

MAX_BODY_BYTES = 1024 * 1024
JSON = "application/json"

ServicesFactory = Callable[[], Awaitable[tuple[Services, Callable[[], Awaitable[None]]]]]


def _reply(reply: HttpReply, request: Request[Any, Any, Any]) -> Response[bytes]:
    content = b"" if reply.body is None else msgspec.json.encode(reply.body)
    headers = dict(reply.headers)
    if (challenge := headers.get("WWW-Authenticate")) is not None:
        headers["WWW-Authenticate"] = with_resource_metadata(challenge, str(request.base_url))
    return Response(content, status_code=reply.status, media_type=JSON, headers=headers)


def _headers(request: Request[Any, Any, Any]) -> dict[str, str]:
    return {key.lower(): value for key, value in request.headers.items()}


def _origin_allowed(headers: Mapping[str, str], allowed: list[str]) -> bool:
    return origin_allowed(headers.get("origin"), allowed)


def _forbidden_origin() -> HttpReply:
    fault = JsonRpcFault(INVALID_REQUEST, "origin not allowed", http_status=403)
    return HttpReply(403, fault.to_response(None))


def _header_refusal(
    request: Request[Any, Any, Any], headers: Mapping[str, str], *, json_only: bool
) -> HttpReply | None:
    fault = duplicate_credential_fault(request.scope["headers"])
    if fault is None and json_only and not is_json_content_type(headers.get("content-type")):
        fault = unsupported_media_fault()
    if fault is None:
        return None
    return HttpReply(fault.http_status, fault.to_response(None), dict(fault.headers))


@post("/mcp", status_code=200)
async def mcp_post(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    """One JSON-RPC message in, one reply out (stateless Streamable HTTP)."""
    headers = _headers(request)
    services: Services = state.services
    if not _origin_allowed(headers, services.settings.server.allowed_origins):
        return _reply(_forbidden_origin(), request)
    if (refusal := _header_refusal(request, headers, json_only=True)) is not None:
        return _reply(refusal, request)
    body = await request.body()
    server: McpServer = state.mcp_server
    # litestar types its scope as a TypedDict; the front door, like any ASGI middleware, adds keys.
    decoded = decoded_before(cast("MutableMapping[str, Any]", request.scope), body)
    return _reply(await server.handle_post(body, headers, decoded), request)


@route("/mcp", http_method=["GET", "DELETE"], status_code=405)
async def mcp_other() -> Response[bytes]:
    """This server offers no standalone SSE stream and no sessions."""
    return Response(b"", status_code=405, headers={"Allow": "POST"})


@post("/tools/{name:str}", status_code=200)
async def tool_post(name: str, request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    """The same dispatch as tools/call, as a plain HTTP route (for schema fuzzing)."""
    headers = _headers(request)
    services: Services = state.services
    if not _origin_allowed(headers, services.settings.server.allowed_origins):
        return _reply(_forbidden_origin(), request)
    if (refusal := _header_refusal(request, headers, json_only=False)) is not None:
        return _reply(refusal, request)
    dispatcher: ToolDispatcher = state.dispatcher
    try:
        arguments = decode_arguments(await request.body())
    except JsonRpcFault as fault:
        return _reply(HttpReply(fault.http_status, fault.to_response(None)), request)
    try:
        outcome = await dispatcher.call(name, arguments, headers)
    except JsonRpcFault as fault:
        return _reply(HttpReply(fault.http_status, fault.to_response(None), fault.headers), request)
    return _reply(HttpReply(200, outcome.to_call_result()), request)


@get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


# The collector's thresholds while serving. Python's (700, 10, 10) collected the youngest
# generation ~50 times a second under load (0.28 ms each) and the whole heap every ~2.5 s
# (35-40 ms each, the loop held throughout: the tail of every call in flight); with 20,000
# a tools/call's objects, nearly all freed by reference counting, rarely add up to a
# collection (13 in 50 s at 400-500 calls a second, 1.0 -> 0.05 s of the loop), and full
# collections come every few minutes.
SERVING_GC_THRESHOLDS = (20_000, 10, 10)


@get("/metrics")
async def metrics_get() -> Response[bytes]:
    """Prometheus exposition (seed 001 "Observability And Audit"; see docs/OPERATIONS.md)."""
    body, content_type = metrics.render()
    # litestar appends "; charset=utf-8" to a text/ media type itself: send it once.
    media_type = "; ".join(
        part.strip() for part in content_type.split(";") if not part.strip().startswith("charset=")
    )
    return Response(body, status_code=200, media_type=media_type)


@get(METADATA_PATH)
async def protected_resource_get(request: Request[Any, Any, Any], state: State) -> dict[str, Any]:
    """OAuth protected resource metadata (RFC 9728), as MCP authorization asks."""
    services: Services = state.services
    issuers = services.settings.security.user_token.issuers
    return resource_metadata(str(request.base_url), issuers)


@get("/readyz")
async def readyz(state: State) -> Response[dict[str, Any]]:
    """Readiness: database reachable, migrations current, keyring loaded."""
    services: Services = state.services
    checks = await services.readiness()
    ready = all(checks.values())
    return Response({"ready": ready, "checks": checks}, status_code=200 if ready else 503)


def attach_services(
    app: Litestar,
    services: Services,
    handlers: Mapping[ToolName, ToolHandler],
    routes: Mapping[ToolName, ToolRoute] = ROUTES,
) -> None:
    """Wire the served tools (each route with a handler) and the MCP server to the app's state."""
    registry = ToolRegistry(routes, handlers)
    dispatcher = ToolDispatcher(registry, services)
    app.state.services = services
    metrics.watch_pool("service", services.database.pool.get_stats)
    app.state.dispatcher = dispatcher
    app.state.mcp_server = McpServer(
        registry,
        dispatcher,
        page_size=services.settings.server.tools_list_page_size,
        list_ttl_ms=services.settings.server.tools_list_ttl_ms,
        gate=BearerGate(services.authenticator, services.settings.server.anonymous_discovery),
        tasks=TaskService(
            dispatcher, services, page_size=services.settings.server.tools_list_page_size
        ),
    )


def create_app(
    services_factory: ServicesFactory | None = None,
    handlers: Mapping[ToolName, ToolHandler] | None = None,
    routes: Mapping[ToolName, ToolRoute] = ROUTES,
) -> Litestar:
    """Build the ASGI app; with a factory, services are created at start-up, closed at shutdown.

    Background work (jobs, an in-process executor) belongs to the factory: the composition
    package starts it with the services and stops it in their close. The handler table
    (handlers.HANDLERS) comes with the factory: this package never imports the handlers.

    Without one the caller attaches services itself (attach_services), as tests do.
    """
    if services_factory is not None and handlers is None:
        raise ValueError("create_app: a services factory needs the handler table")

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        assert services_factory is not None and handlers is not None
        services, close = await services_factory()
        attach_services(app, services, handlers, routes)
        # What serve's start-up built (modules, routes, schemas, services) lives as long as the
        # process: out of the collector's way, a full collection triggered by a publication
        # thread no longer holds the GIL (and so the serving loop) for the whole heap, measured
        # at ~170 ms. Here, not in attach_services: a process that attaches services again and
        # again (tests) would freeze each one's garbage for good.
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(*SERVING_GC_THRESHOLDS)
        try:
            yield
        finally:
            gc.set_threshold(*thresholds)
            await close()

    return Litestar(
        route_handlers=[
            mcp_post,
            mcp_other,
            tool_post,
            healthz,
            readyz,
            metrics_get,
            protected_resource_get,
        ],
        lifespan=[lifespan] if services_factory is not None else [],
        request_max_body_size=MAX_BODY_BYTES,
        debug=False,
        # Logging is the process's (runtime.telemetry): litestar's default would replace the
        # root handlers with its own format.
        logging_config=None,
    )
