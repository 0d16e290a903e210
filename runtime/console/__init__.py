"""The console (issue 39): server-rendered pages for the people in the loop, at /console.

Every action is a tool call through the MCP dispatcher (ToolDispatcher.call_as) with the
signed-in person's verified context: the same roles, host scoping and handlers as POST /mcp.
"""

from __future__ import annotations

from litestar import Litestar, Router

from runtime.console import bindings, runs, signin, tasks

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


def register_console(app: Litestar, *, dev_sign_in: bool) -> None:
    """Serve the console on app; dev_sign_in: accept development user tokens (development only)."""
    app.state.console_dev_sign_in = dev_sign_in
    app.register(console_router())
