"""The service's commands of `workflow-mcp`: serve, worker, migrate, token, check, runs, secrets,
draft.

The entry point is workflow_mcp.cli, which adds the clients' commands (publish, gateway) and the
document with their sections: nothing here imports gateway or publisher. Every command reads the
same settings: a YAML file (--config or $WORKFLOW_CONFIG) with WORKFLOW_<SECTION>_<KEY>
environment variables over it (see config.example.yaml).
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

import msgspec

from handlers import HANDLERS
from runtime import telemetry
from runtime.admission import Admission
from runtime.collaborators import Services
from runtime.composition.authoring_command import (
    add_draft_parser,
    draft_command,
    with_fixtures,
)
from runtime.composition.bootstrap import (
    apply_dev_identity,
    build_services,
    dev_token_routes,
)
from runtime.composition.check import run_check
from runtime.composition.config import load_settings
from runtime.composition.convert_command import add_convert_parser
from runtime.composition.environment import EnvironmentSettingError
from runtime.composition.front_door import FrontDoor
from runtime.composition.http_server import run_http_server
from runtime.composition.jobs import with_service_jobs
from runtime.composition.runs import add_runs_parser, runs_command
from runtime.composition.secrets import add_secrets_parser, secrets_command
from runtime.composition.worker import run_worker
from runtime.console import register_console
from runtime.execution import stop_waiting
from runtime.mcp.app import create_app
from runtime.publication import policy_from_settings
from runtime.security.devtools import DEV_HOST_ID
from runtime.security.devtools import main as devtools_main
from runtime.settings import Settings
from runtime.store.bootstrap import resolve_conninfo
from runtime.store.migrations import migrate, summary

PROG = "workflow-mcp"
DESCRIPTION = (
    "The `workflow-mcp` command line: serve, worker, migrate, token, check, runs, secrets."
)

Document = TypeVar("Document", bound=Settings)
# Adds one subcommand (its parser, and its run function as the `run` default).
AddCommand = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


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
            f"the console: http://{host}:{port}/console (sign in with a user token such as $USER)",
        ]
    return "\n".join(lines)


def command_settings(args: argparse.Namespace, document: type[Document]) -> Document:
    """A command's settings: the document from --config, --database-url over it, telemetry set."""
    settings = load_settings(args.config, document=document)
    if getattr(args, "database_url", None):
        settings.store.database_url = args.database_url
    telemetry.configure(settings.telemetry)
    return settings


def _settings(args: argparse.Namespace) -> Settings:
    # The document the entry point chose (build_parser's), so every command accepts its sections.
    document: type[Settings] = args.document
    return command_settings(args, document)


def serve(args: argparse.Namespace) -> int:
    """Run the HTTP server until interrupted."""
    settings = _settings(args)
    if args.no_workers:
        # Execution is left to `workflow-mcp worker` processes on the same database.
        settings.execution.workers_enabled = False
    identity = apply_dev_identity(settings)
    dev = identity is not None
    # One admission for the process: the HTTP server's front door and the handlers share it.
    admission = Admission(settings.capacity)
    app = create_app(with_service_jobs(lambda: build_services(settings, admission)), HANDLERS)
    if identity is not None:
        for route in dev_token_routes(identity):
            app.register(route)
    # The console's development sign-in accepts dev tokens only where the dev identity is in use.
    register_console(app, dev_sign_in=dev, settings=settings.console)
    server = settings.server
    print(_usage_banner(server.host, server.port, settings.store.data_dir, dev), flush=True)

    def drain() -> None:
        # Services exist once the lifespan started them (a stop during start-up has none).
        services: Services | None = app.state.get("services")
        # Calls still waiting at the front door are answered too (retryable).
        admission.door.close()
        if services is not None:
            stop_waiting(services.database)

    front_door = FrontDoor(app, admission)
    run_http_server(
        # workflow_invoke's front door stands before litestar (runtime.admission.door).
        front_door,
        host=server.host,
        port=server.port,
        keep_alive_timeout_s=server.keep_alive_timeout_s,
        shutdown_grace_s=server.shutdown_grace_s,
        on_drain=drain,
        early_answer=front_door.answer_on_arrival,
    )
    return 0


_SLOT_FLAGS = ("interactive_slots", "standard_slots", "batch_slots")
_TIMING_FLAGS = ("lease_ms", "renew_interval_ms", "reap_interval_ms", "poll_interval_ms")


def _worker_settings(args: argparse.Namespace) -> Settings:
    settings = _settings(args)
    overrides: dict[str, int] = {}
    if args.slots is not None:
        overrides |= dict.fromkeys(_SLOT_FLAGS, args.slots)
    for name in (*_SLOT_FLAGS, *_TIMING_FLAGS):
        if getattr(args, name) is not None:
            overrides[name] = getattr(args, name)
    section = msgspec.to_builtins(settings.execution) | overrides
    # convert, not replace: the section's own checks run on the overridden values.
    settings.execution = msgspec.convert(section, type(settings.execution))
    return settings


def worker(args: argparse.Namespace) -> int:
    """Run a worker process until SIGTERM/SIGINT."""
    settings = _worker_settings(args)
    apply_dev_identity(settings)
    asyncio.run(run_worker(settings, worker_id=args.worker_id, handlers=args.handlers))
    return 0


async def _migrate(settings: Settings) -> str:
    conninfo, embedded = await resolve_conninfo(settings.store)
    try:
        done = await migrate(conninfo)
    finally:
        if embedded is not None and not embedded.reused:
            await asyncio.to_thread(embedded.stop)
    return summary(done)


def migrate_command(args: argparse.Namespace) -> int:
    """Apply pending migrations and install changed function files on the configured database."""
    print(asyncio.run(_migrate(_settings(args))))
    return 0


def check(args: argparse.Namespace) -> int:
    """Check definition files offline, as publication would; exit 0 clean, 1, or 2."""
    settings = _settings(args)
    code, text = run_check(
        args.files,
        binding=args.binding,
        strict=args.strict,
        output_format=args.format,
        destinations=policy_from_settings(settings.publication.destinations),
    )
    if args.fixtures is not None:  # issue 38: the fixtures run too, against stub Tools
        code, text = with_fixtures(code, text, args.files, args.fixtures, args.format)
    print(text)
    return code


def draft(args: argparse.Namespace) -> int:
    """Draft a definition with the authoring model, as workflow_definition_draft does."""
    return draft_command(_settings(args), args)


def runs(args: argparse.Namespace) -> int:
    """List, show or cancel runs of one host."""
    return runs_command(_settings(args), args)


def secrets(args: argparse.Namespace) -> int:
    """Put, list or delete a host's secrets (the keyring the service seals with)."""
    settings = _settings(args)
    apply_dev_identity(settings)  # the development keyring of `make run`, when it is in use
    return secrets_command(settings, args)


def _config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="YAML settings file ($WORKFLOW_CONFIG)")


def _worker_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser(
        "worker",
        help="claim and run workflow tasks (no API)",
        description="Run workflow tasks from the shared database; pair with `serve --no-workers`.",
    )
    _config_option(run)
    run.add_argument("--database-url", default=None, help="overrides store.database_url")
    run.add_argument("--worker-id", default=None, help="the id this worker claims under")
    run.add_argument(
        "--slots", type=int, default=None, help="tasks run at once in each execution class"
    )
    for name in (*_SLOT_FLAGS, *_TIMING_FLAGS):
        flag = "--" + name.replace("_", "-")
        run.add_argument(flag, type=int, default=None, help=f"overrides execution.{name}")
    # Tests and benchmarks run other task kinds ("module:attribute"); production never needs it.
    run.add_argument("--handlers", default=None, help=argparse.SUPPRESS)
    run.set_defaults(run=worker)


def _check_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser(
        "check",
        help="check workflow definition files offline, as publication would",
        description="Print each definition's digests, problems, warnings and the static "
        "analysis a binding needs. Exit 0 when clean, 1 for warnings with --strict, 2 when "
        "publication would refuse a file (or the --binding payload).",
    )
    _config_option(run)
    run.add_argument("files", nargs="+", metavar="FILE", help="definitions, YAML or JSON")
    run.add_argument(
        "--binding", default=None, help="workflow_binding_publish arguments to check (YAML/JSON)"
    )
    run.add_argument("--strict", action="store_true", help="exit 1 when there are warnings")
    run.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    run.add_argument(
        "--fixtures",
        default=None,
        metavar="FILE",
        help="fixtures to run against each definition with stub Tools (YAML/JSON: a list, or "
        "{fixtures, toolOutputSchemas}, e.g. a workflow_definition_draft output); exit 1 when "
        "one fails",
    )
    run.set_defaults(run=check)


def build_parser(
    extra: Sequence[AddCommand] = (), document: type[Settings] = Settings
) -> argparse.ArgumentParser:
    """The argument parser of the service's commands, then extra's; settings load as document."""
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION)
    parser.set_defaults(document=document)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser("serve", help="serve MCP over HTTP")
    _config_option(run)
    run.add_argument(
        "--no-workers",
        action="store_true",
        help="run no in-process executor: `workflow-mcp worker` processes execute the runs",
    )
    run.set_defaults(run=serve)
    _worker_parser(commands)
    run = commands.add_parser(
        "migrate", help="apply pending database migrations and changed function files"
    )
    _config_option(run)
    run.add_argument("--database-url", default=None, help="overrides store.database_url")
    run.set_defaults(run=migrate_command)
    commands.add_parser(
        "token", help="mint a development token (`workflow-mcp token --help` for its options)"
    )
    _check_parser(commands)
    add_convert_parser(commands)
    add_runs_parser(commands)
    commands.choices["runs"].set_defaults(run=runs)
    add_secrets_parser(commands)
    commands.choices["secrets"].set_defaults(run=secrets)
    add_draft_parser(commands)
    commands.choices["draft"].set_defaults(run=draft)
    for add in extra:
        add(commands)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    extra: Sequence[AddCommand] = (),
    document: type[Settings] = Settings,
) -> int:
    """Run one command line: the service's commands and extra's (workflow_mcp.cli passes them)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "token":
        # The development token minter keeps its own options (and --help).
        return devtools_main(["mint", *args[1:]], mint_prog="workflow-mcp token")
    parsed = build_parser(extra, document).parse_args(args)
    # Defaults until a command has loaded its settings (which may choose another format).
    telemetry.configure_logging(telemetry.TelemetrySettings())
    try:
        code: int = parsed.run(parsed)
    except (msgspec.ValidationError, EnvironmentSettingError) as error:
        # A configuration mistake is the operator's to fix: one line, no traceback.
        print(f"{PROG}: configuration error: {error}", file=sys.stderr)
        return 2
    return code
