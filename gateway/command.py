"""`workflow-mcp gateway`: the reference Gateway's command line (workflow_mcp.cli adds it)."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from gateway.app import build_gateway, create_gateway_app
from gateway.credentials import GatewayConfigurationError
from gateway.router import RouterError
from gateway.settings import GatewayConfig
from runtime import telemetry
from runtime.security import DevIdentity, KeySetError

log = logging.getLogger("workflow.gateway")
SERVICE_NAME = "workflow-mcp-gateway"


def add_gateway_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `gateway` subcommand and its options (each overrides a `gateway` setting)."""
    run = commands.add_parser(
        "gateway",
        help="serve workflow-backed Tools from mcp-router.yml (the reference Gateway)",
        description="Serve the Tools of an mcp-router.yml snapshot over MCP, calling Workflow's "
        "workflow_invoke for each, and relay Workflow's publication and lifecycle tools.",
    )
    run.add_argument("--config", default=None, help="YAML settings file ($WORKFLOW_CONFIG)")
    run.add_argument("--router", default=None, help="the snapshot (gateway.router_file)")
    run.add_argument("--workflow-url", default=None, help="Workflow's MCP endpoint")
    run.add_argument("--host", default=None, help="listen address (gateway.host)")
    run.add_argument("--port", type=int, default=None, help="listen port (gateway.port)")


def apply_arguments(settings: GatewayConfig, args: argparse.Namespace) -> None:
    """Command-line options over the loaded `gateway` section."""
    section = settings.gateway
    if args.router is not None:
        section.router_file = args.router
    if args.workflow_url is not None:
        section.workflow_url = args.workflow_url
    if args.host is not None:
        section.host = args.host
    if args.port is not None:
        section.port = args.port


def run_gateway(settings: GatewayConfig, identity: DevIdentity | None) -> int:
    """Serve until interrupted (settings already loaded, the dev identity applied if any)."""
    if settings.telemetry.service_name == "workflow-mcp":
        settings.telemetry.service_name = SERVICE_NAME
        telemetry.configure_tracing(settings.telemetry)
    section = settings.gateway
    try:
        app = create_gateway_app(build_gateway(settings, identity=identity))
    except (GatewayConfigurationError, RouterError, KeySetError, OSError) as error:
        # The operator's to fix: one line, no traceback (never a token: none is quoted).
        print(f"workflow-mcp gateway: configuration error: {error}", file=sys.stderr)
        return 2
    print(
        f"workflow-mcp gateway serving MCP on http://{section.host}:{section.port}/mcp "
        f"(snapshot {section.router_file}, Workflow {section.workflow_url}"
        f"{', development identity' if identity is not None else ''})",
        flush=True,
    )
    uvicorn.run(
        app, host=section.host, port=section.port, log_level="info", log_config=None,
        access_log=False, timeout_keep_alive=section.keep_alive_timeout_s,
        # As `serve` (runtime/composition/http_server.py): uvloop and httptools cut the relay's CPU.
        loop="uvloop", http="httptools",
    )  # fmt: skip
    return 0
