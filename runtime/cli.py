"""The service command line: serve MCP, mint development tokens."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence

import uvicorn

from runtime.bootstrap import apply_dev_identity, build_services
from runtime.config import load_settings
from runtime.mcp.app import create_app
from runtime.security.devtools import DEV_HOST_ID
from runtime.security.devtools import main as devtools_main


def _usage_banner(host: str, port: int, data_dir: str, dev: bool) -> str:
    url = f"http://{host}:{port}/mcp"
    lines = [f"workflow-mcp serving MCP on {url}"]
    if dev:
        dev_dir = shlex.quote(f"{data_dir}/dev")
        lines += [
            f"a development host id: {DEV_HOST_ID}",
            "development identity (no trusted keys configured):",
            f"  USER=$(make -s token ARGS='--dir {dev_dir} --kind user --roles workflow-admin')",
            f"  APP=$(make -s token ARGS='--dir {dev_dir} --kind app')",
            "call a tool:",
            f"  curl -s {url} -H 'Content-Type: application/json' \\",
            '    -H "Authorization: Bearer $USER" -H "X-Scope-Token: Bearer $APP" \\',
            "    -H 'MCP-Protocol-Version: 2025-11-25' \\",
            """    -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'""",
        ]
    return "\n".join(lines)


def serve(config: str | None) -> int:
    """Run the HTTP server until interrupted."""
    settings = load_settings(config)
    dev = apply_dev_identity(settings) is not None

    app = create_app(lambda: build_services(settings))
    server = settings.server
    print(_usage_banner(server.host, server.port, settings.store.data_dir, dev), flush=True)
    uvicorn.run(app, host=server.host, port=server.port, log_level="info")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m runtime.cli`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "token":
        return devtools_main(["mint", *args[1:]])
    parser = argparse.ArgumentParser(prog="workflow-mcp")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve MCP over HTTP")
    run.add_argument("--config", default=None, help="YAML settings file ($WORKFLOW_CONFIG)")
    commands.add_parser("token", help="mint a development token (see --help of devtools mint)")
    parsed = parser.parse_args(args)
    return serve(parsed.config)


if __name__ == "__main__":
    raise SystemExit(main())
