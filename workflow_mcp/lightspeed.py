"""`workflow-mcp lightspeed`: the seed 003 contract at the command line (vectors, ids, parse).

Exit 0 when the answer is the one asked for; 2 when input is refused or a vector does not
reproduce, with one line on stderr naming the field.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from runtime.composition.cli import command_settings
from runtime.lightspeed import (
    ContractError,
    check_vectors,
    invocation_cancellation_id,
    parse_document,
    run_terminal_id,
    source_resolution_id,
    tool_invocation_id,
)
from runtime.receiver import recover as recover_from_runs
from runtime.settings import Settings
from runtime.store.bootstrap import open_store

EXIT_OK = 0
EXIT_REFUSED = 2
PROG = "workflow-mcp lightspeed"

# Each kind's flags (dest names), and how the id derives from them.
KIND_FLAGS: dict[str, tuple[str, ...]] = {
    "source_resolution": ("universe", "producer", "holder", "promise"),
    "run_terminal": ("universe", "session", "run_id", "token"),
    "invocation_cancellation": ("invocation", "key"),
    "tool_invocation": ("invocation",),
}
DERIVE: dict[str, Callable[..., str]] = {
    "source_resolution": source_resolution_id,
    "run_terminal": run_terminal_id,
    "invocation_cancellation": invocation_cancellation_id,
    "tool_invocation": tool_invocation_id,
}


def _refuse(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return EXIT_REFUSED


def _load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ContractError("", f"{what} is not JSON: {error}") from None


def vectors(args: argparse.Namespace) -> int:
    """Recompute every value of a vectors document; one `ok` line each, exit 2 on a mismatch."""
    try:
        document = _load_json(Path(args.check).read_text(encoding="utf-8"), args.check)
        checks = check_vectors(document)
    except OSError as error:
        return _refuse(f"cannot read {args.check}: {error.strerror}")
    except ContractError as error:
        return _refuse(f"vectors refused: {error}")
    for check in checks:
        print(check.line())
    failed = [check.name for check in checks if not check.ok]
    if failed:
        return _refuse(f"{len(failed)} value(s) do not reproduce: {', '.join(failed)}")
    return EXIT_OK


def emission_id(args: argparse.Namespace) -> int:
    """Print the derived emission id of one kind from its flags."""
    flags = KIND_FLAGS[args.kind]
    missing = [_flag(name) for name in flags if getattr(args, name) is None]
    if missing:
        return _refuse(f"{args.kind} needs {' '.join(missing)}")
    values: list[Any] = [getattr(args, name) for name in flags]
    if args.kind == "run_terminal":
        values[2] = _run_id(values[2])
        if values[2] is None:
            return _refuse("--run: expected an unsigned 64-bit integer")
    try:
        print(DERIVE[args.kind](*values))
    except ContractError as error:
        return _refuse(str(error))
    return EXIT_OK


def _flag(dest: str) -> str:
    return "--run" if dest == "run_id" else f"--{dest}"


def _run_id(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def parse(args: argparse.Namespace) -> int:
    """Parse an envelope (or WorkflowToolStartArgs) from stdin; print it back as JSON."""
    try:
        document = parse_document(_load_json(sys.stdin.read(), "stdin"))
    except ContractError as error:
        return _refuse(f"refused: {error}")
    print(json.dumps(document.document(), indent=2))
    return EXIT_OK


async def _recover(settings: Settings, host_id: str, execution_id: str) -> dict[str, Any]:
    store_settings = msgspec.structs.replace(settings.store, pool_min_size=1, pool_max_size=2)
    store = await open_store(store_settings, run_migrations=False)
    try:
        return await recover_from_runs(store.database, host_id, execution_id)
    finally:
        await store.close(stop_embedded=False)


def recover(args: argparse.Namespace) -> int:
    """workflow_tool_recovery: the resolutions an execution (producer id) has made, as JSON."""
    settings = command_settings(args, args.document)
    answer = asyncio.run(_recover(settings, args.host, args.execution_id))
    print(json.dumps(answer, separators=(",", ":")))
    return EXIT_OK


def add_lightspeed_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `lightspeed` and its subcommands."""
    top = commands.add_parser(
        "lightspeed",
        help="the Lightspeed workflow contract (seed 003): vectors, emission ids, parse",
        description="Seed 003's envelope family and derived ids, offline.",
    )
    sub = top.add_subparsers(dest="lightspeed_command", required=True, metavar="COMMAND")
    run = sub.add_parser("vectors", help="reproduce a known-answer vectors document")
    run.add_argument("--check", required=True, metavar="FILE", help="the vectors JSON to check")
    run.set_defaults(run=vectors)
    run = sub.add_parser("emission-id", help="derive one emission id")
    run.add_argument(
        "kind", choices=sorted(KIND_FLAGS), metavar="KIND", help=str(sorted(KIND_FLAGS))
    )
    for name in ("universe", "producer", "holder", "promise", "session", "token"):
        run.add_argument(f"--{name}", default=None)
    run.add_argument("--run", dest="run_id", default=None, help="the session run id (u64)")
    run.add_argument("--invocation", default=None)
    run.add_argument("--key", default=None, help="the completion key (the reserved one: reply)")
    run.set_defaults(run=emission_id)
    run = sub.add_parser("parse", help="parse an envelope or start args on stdin, print it back")
    run.set_defaults(run=parse)
    run = sub.add_parser(
        "recover",
        help="workflow_tool_recovery: the resolutions an execution has made (from run state)",
    )
    run.add_argument(
        "--execution-id",
        required=True,
        help="the producer workflow id: a start's execution_id or the receiver id of a mapping",
    )
    run.add_argument("--host", required=True, help="the host id the runs belong to")
    run.add_argument("--config", default=None, help="YAML settings file ($WORKFLOW_CONFIG)")
    run.add_argument("--database-url", default=None, help="overrides store.database_url")
    run.set_defaults(run=recover)
