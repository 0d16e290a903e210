"""The console (issue 39): server-rendered pages for the people in the loop, at /console.

Every action is a tool call through the MCP dispatcher (ToolDispatcher.call_as) with the
signed-in person's verified context: the same roles, host scoping and handlers as POST /mcp.
"""

from __future__ import annotations

import httpx
from litestar import Litestar, Router

from runtime.console import bindings, oidc_routes, runs, signin, tasks
from runtime.console.oidc import OidcClient
from runtime.settings import ConsoleSettings

__all__ = ["console_router", "register_console"]


def console_router() -> Router:
    """The /console routes."""
    return Router(
        path=signin.PATH,
        include_in_schema=False,
        route_handlers=[
            signin.console_home,
            signin.sign_in_form,
            signin.sign_in,
            signin.sign_out,
            signin.static_file,
            oidc_routes.oidc_start,
            oidc_routes.oidc_callback,
            tasks.inbox,
            tasks.task_view,
            tasks.task_answer,
            runs.runs_list,
            runs.run_view,
            runs.run_cancel,
            bindings.approvals,
            bindings.tools,
            bindings.tool_view,
            bindings.tool_decide,
            bindings.tool_revoke,
            bindings.tool_rollback,
        ],
    )


def register_console(
    app: Litestar,
    *,
    dev_sign_in: bool,
    settings: ConsoleSettings | None = None,
    oidc_transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """Serve the console on app (unless settings disable it).

    dev_sign_in: accept development user tokens (development mode only); settings with an
    OpenID Connect issuer: sign-in with it (oidc_transport: a test's way to the issuer).
    """
    settings = settings or ConsoleSettings()
    if not settings.enabled:
        return
    app.state.console_dev_sign_in = dev_sign_in
    oidc = OidcClient(settings, transport=oidc_transport) if settings.oidc_configured else None
    app.state.console_oidc = oidc
    if oidc is not None:
        app.on_shutdown.append(oidc.aclose)
    app.register(console_router())
