"""`workflow-mcp runs list|show|cancel|compensate`: run inspection through the services, for
operators."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec

from runtime.errors import WorkflowError
from runtime.execution import compensation_store
from runtime.execution.compensation import credential_refusal
from runtime.human_tasks import store as human_tasks
from runtime.invocation.results import compensation_document
from runtime.invocation.waiting import cancel_run
from runtime.scheduler.inspection import COMPENSATION_STATES, RUN_STATES, list_runs, show_run
from runtime.settings import Settings
from runtime.store import Database
from runtime.store.bootstrap import open_store

LIST_COLUMNS = (
    "process_id", "state", "tool_name", "execution_class", "effect_state", "compensation",
    "created_ts",
)  # fmt: skip
TIMELINE_COLUMNS = ("ts", "event", "step_no", "kind", "attempts", "worker_id")
BUDGET_COLUMNS = ("counter", "limit", "used", "remaining")
HUMAN_TASK_COLUMNS = (
    "task_id", "task_name", "state", "assignee_kind", "assignee", "created_ts", "due_ts",
    "answered_by", "answered_ts",
)  # fmt: skip
COMPENSATION_COLUMNS = ("task", "state", "attempts", "error")
RUN_FIELDS = (
    "process_id", "state", "operation", "tool_name", "tool_id", "execution_class",
    "cancellation_policy", "effect_state", "cancel_requested", "binding_id", "created_ts",
    "deadline_ts", "finished_ts", "error",
)  # fmt: skip


def cancelled_by_operator() -> WorkflowError:
    """The stored error of a run an operator cancelled."""
    return WorkflowError(
        "WORKFLOW_CANCELLED", "the run was cancelled by an operator", status="cancelled"
    )


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, dict | list):
        return msgspec.json.encode(value).decode()
    return str(value)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """rows as an aligned text table with a header line."""
    cells = [list(columns)] + [[_text(row.get(name)) for name in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def _json(value: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(value)).decode()


async def _with_database(settings: Settings, work: Callable[[Database], Awaitable[int]]) -> int:
    store_settings = msgspec.structs.replace(settings.store, pool_min_size=1, pool_max_size=2)
    store = await open_store(store_settings, run_migrations=False)
    try:
        return await work(store.database)
    finally:
        await store.close(stop_embedded=False)


async def _list(db: Database, args: argparse.Namespace) -> int:
    runs = await list_runs(
        db,
        args.host,
        state=args.state,
        tool=args.tool,
        limit=args.limit,
        compensation=args.compensation,
    )
    print(_json(runs) if args.json else table(runs, LIST_COLUMNS))
    return 0


async def _show(db: Database, args: argparse.Namespace) -> int:
    run = await show_run(db, args.host, args.run_id)
    if run is None:
        print(f"no run {args.run_id} on host {args.host}", file=sys.stderr)
        return 1
    async with db.transaction(read_only=True) as conn:
        listed = await human_tasks.run_tasks(conn, args.host, str(run["process_id"]))
    run["human_tasks"] = [msgspec.structs.asdict(task) for task in listed]
    run["compensation"] = await _compensation_of(db, args.host, run)
    if args.json:
        print(_json(run))
        return 0
    width = max(map(len, RUN_FIELDS))
    print("\n".join(f"{name.ljust(width)}  {_text(run.get(name))}" for name in RUN_FIELDS))
    budget = [{"counter": name, **amounts} for name, amounts in run["budget"].items()]
    print()
    print(table(budget, BUDGET_COLUMNS))
    print()
    print(table(run["timeline"], TIMELINE_COLUMNS))
    if run["human_tasks"]:
        print()
        print(table(run["human_tasks"], HUMAN_TASK_COLUMNS))
    compensation = run["compensation"]
    if compensation is not None:
        print()
        print(f"compensation  {compensation['state']}")
        if compensation["steps"]:
            print(table(compensation["steps"], COMPENSATION_COLUMNS))
    return 0


async def _compensation_of(db: Database, host_id: str, run: Mapping[str, Any]) -> Any:
    """The compensation of a FAILED or CANCELLED run as status reads show it (else None)."""
    if run["state"] not in ("FAILED", "CANCELLED"):
        return None
    async with db.transaction(read_only=True) as conn:
        record = await compensation_store.select_compensation(conn, host_id, str(run["process_id"]))
    return msgspec.to_builtins(compensation_document(record))


async def _compensate(db: Database, args: argparse.Namespace) -> int:
    """Start a failed compensation again: its failed steps run once more, the rest stay."""
    run = await show_run(db, args.host, args.run_id)
    if run is None:
        print(f"no run {args.run_id} on host {args.host}", file=sys.stderr)
        return 1
    refused = await credential_refusal(db, str(run["host_id"]), str(run["process_id"]))
    if refused is not None:
        raise refused  # typed, before anything changes (runtime.execution.compensation)
    async with db.transaction() as conn:
        retried = await compensation_store.retry_compensation(
            conn, str(run["host_id"]), str(run["process_id"])
        )
    if retried is None:
        print("no failed compensation to retry", file=sys.stderr)
        return 1
    print(f"compensation restarted ({retried})")
    return 0


async def _cancel(db: Database, args: argparse.Namespace) -> int:
    run = await show_run(db, args.host, args.run_id)
    if run is None:
        print(f"no run {args.run_id} on host {args.host}", file=sys.stderr)
        return 1
    # The same path as workflow_cancel: policy, effect state and fencing rules all apply.
    outcome = await cancel_run(db, args.host, args.run_id, cancelled_by_operator())
    print(outcome)
    return 0 if outcome in ("cancelled", "cancellationRequested", "alreadyTerminal") else 1


def runs_command(settings: Settings, args: argparse.Namespace) -> int:
    """Run one `runs` subcommand against the configured database."""
    work = {"list": _list, "show": _show, "cancel": _cancel, "compensate": _compensate}[
        args.runs_command
    ]
    try:
        return asyncio.run(_with_database(settings, lambda db: work(db, args)))
    except WorkflowError as error:
        print(f"{error.code}: {error.message}", file=sys.stderr)
        return 2


def add_runs_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `runs` command and its list, show and cancel subcommands."""
    runs = commands.add_parser(
        "runs", help="list, show or cancel a host's runs, or retry a failed compensation"
    )
    verbs = runs.add_subparsers(dest="runs_command", required=True, metavar="VERB")
    listing = verbs.add_parser("list", help="a host's runs, newest first")
    listing.add_argument("--state", choices=RUN_STATES, default=None)
    listing.add_argument("--tool", default=None, help="only runs of this Tool (its id or name)")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument(
        "--compensation",
        choices=COMPENSATION_STATES,
        default=None,
        help="only runs whose compensation is in this state (failed: needs an operator)",
    )
    show = verbs.add_parser(
        "show",
        help="one run: state, effect state, budget used, error, timeline of tasks, human tasks, "
        "compensation",
    )
    show.add_argument("run_id", help="the workflowInstanceId")
    cancel = verbs.add_parser("cancel", help="cancel one run per its cancellation policy")
    cancel.add_argument("run_id", help="the workflowInstanceId")
    compensate = verbs.add_parser(
        "compensate", help="retry the failed compensation of a FAILED or CANCELLED run"
    )
    compensate.add_argument("run_id", help="the workflowInstanceId")
    for verb in (listing, show, cancel, compensate):
        verb.add_argument("--host", required=True, help="the host id the run belongs to")
        verb.add_argument("--config", default=None, help="YAML settings file ($WORKFLOW_CONFIG)")
        verb.add_argument("--database-url", default=None, help="overrides store.database_url")
    for verb in (listing, show):
        verb.add_argument("--json", action="store_true", help="JSON instead of a table")
