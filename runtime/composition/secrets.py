"""`workflow-mcp secrets put|list|delete`: the host secret store, for operators (issue 24).

The same service functions as the workflow_secret_* tools, with the same checks: the value
read from stdin goes through the tool's generated validator, is sealed with the configured
keyring, and is never printed; put and delete are recorded in the operation ledger under an
operator identity (`operator:<login>`), each with a fresh operationId unless --operation-id
repeats one (a retry then replays the first answer).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from fastjsonschema import JsonSchemaValueException

from generated.models import (
    WorkflowSecretDeleteInput,
    WorkflowSecretListInput,
    WorkflowSecretPutInput,
)
from generated.routes import ROUTES
from runtime.composition.runs import table
from runtime.errors import WorkflowError
from runtime.publication import delete_secret, list_secrets, put_secret
from runtime.security import (
    InvocationContext,
    Keyring,
    SecretToken,
    load_configured_keyring,
    normalize_host_id,
)
from runtime.settings import Settings
from runtime.store import Database
from runtime.store.bootstrap import open_store

LIST_COLUMNS = ("name", "version", "updated_at", "updated_by", "referenced_by")
PAGE = 100


def operator_context(host_id: str) -> InvocationContext:
    """The identity the command acts under: the host it names, the operator's login."""
    login = getpass.getuser() or "unknown"
    user_id = f"operator:{login}"[:126]
    return InvocationContext(
        host_id=host_id,
        user_id=user_id,
        subject=user_id,
        roles=frozenset({"admin"}),
        positions=frozenset(),
        caller_service_id="workflow-mcp",
        client_id="workflow-mcp",
        user_token=SecretToken(""),
        user_token_expires_at=datetime.now(UTC) + timedelta(hours=1),
    )


def read_value(stream: Any) -> str:
    """The secret value from stdin: one trailing line break (from echo or a file) removed."""
    text: str = stream.read()
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


def _validated(tool: Any, arguments: dict[str, Any]) -> None:
    try:
        ROUTES[tool].validate_input(arguments)
    except JsonSchemaValueException as refused:
        # The validator's message names the field and the rule, never the value.
        raise WorkflowError("WORKFLOW_INPUT_INVALID", f"invalid {refused.message}") from None


async def _put(db: Database, keyring: Keyring, args: argparse.Namespace) -> int:
    arguments = {
        "hostId": args.host,
        "name": args.name,
        "value": read_value(sys.stdin),
        "operationId": args.operation_id or str(uuid.uuid4()),
    }
    if args.definition is not None:  # the scope; absent keeps it (every definition at first)
        arguments["definitions"] = [str(item).lower() for item in args.definition]
    _validated("workflow_secret_put", arguments)
    request = msgspec.convert(arguments, WorkflowSecretPutInput)
    receipt = await put_secret(db, keyring, operator_context(args.host), request, arguments)
    print(f"{receipt.result} {receipt.name} version {receipt.version}")
    return 0


async def _list(db: Database, _keyring: Keyring, args: argparse.Namespace) -> int:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    context = operator_context(args.host)
    while True:
        arguments: dict[str, Any] = {"hostId": args.host, "limit": PAGE}
        if cursor is not None:
            arguments["cursor"] = cursor
        page = await list_secrets(db, context, msgspec.convert(arguments, WorkflowSecretListInput))
        items += msgspec.to_builtins(page.items)
        if not isinstance(page.next_cursor, str):
            break
        cursor = page.next_cursor
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(items)).decode())
        return 0
    rows = [
        {
            "name": item["name"],
            "version": item["version"],
            "updated_at": item["updatedAt"],
            "updated_by": item["updatedBy"],
            "referenced_by": " ".join(
                f"{ref['wfDefId']}@{ref['version']}" for ref in item["referencedBy"]
            )
            or None,
        }
        for item in items
    ]
    print(table(rows, LIST_COLUMNS))
    return 0


async def _delete(db: Database, _keyring: Keyring, args: argparse.Namespace) -> int:
    arguments = {
        "hostId": args.host,
        "name": args.name,
        "operationId": args.operation_id or str(uuid.uuid4()),
    }
    _validated("workflow_secret_delete", arguments)
    request = msgspec.convert(arguments, WorkflowSecretDeleteInput)
    receipt = await delete_secret(db, operator_context(args.host), request, arguments)
    print(f"{receipt.result} {receipt.name} version {receipt.version}")
    return 0


Work = Callable[[Database, Keyring, argparse.Namespace], Awaitable[int]]


async def _with_store(settings: Settings, work: Work, args: argparse.Namespace) -> int:
    keyring = load_configured_keyring(settings.security)
    store_settings = msgspec.structs.replace(settings.store, pool_min_size=1, pool_max_size=2)
    store = await open_store(store_settings, run_migrations=False)
    try:
        return await work(store.database, keyring, args)
    finally:
        await store.close(stop_embedded=False)


def secrets_command(settings: Settings, args: argparse.Namespace) -> int:
    """Run one `secrets` subcommand against the configured database and keyring."""
    host = normalize_host_id(args.host)
    if host is None:
        print("--host must be a host id (a UUID)", file=sys.stderr)
        return 2
    args.host = host
    work: Work = {"put": _put, "list": _list, "delete": _delete}[args.secrets_command]
    try:
        return asyncio.run(_with_store(settings, work, args))
    except WorkflowError as error:
        print(f"{error.code}: {error.message}", file=sys.stderr)
        return 2


def add_secrets_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `secrets` command and its put, list and delete subcommands."""
    secrets = commands.add_parser("secrets", help="put, list or delete a host's secrets")
    verbs = secrets.add_subparsers(dest="secrets_command", required=True, metavar="VERB")
    put = verbs.add_parser(
        "put",
        help="store NAME's value, read from stdin (a new version when NAME exists)",
        description="Reads the value from stdin (one trailing line break is dropped), seals "
        "it with the configured keyring and stores it as NAME's next version. It is never "
        "printed.",
    )
    put.add_argument("name", metavar="NAME", help="the secret's name, as $secrets.NAME reads it")
    put.add_argument(
        "--definition",
        action="append",
        default=None,
        metavar="WFDEFID",
        help="a definition that may use the secret (repeat for several); without it a new "
        "secret serves every definition of the host and a rotation keeps its scope",
    )
    listing = verbs.add_parser("list", help="the host's secrets: names, versions, references")
    listing.add_argument("--json", action="store_true", help="JSON instead of a table")
    delete = verbs.add_parser(
        "delete", help="delete NAME (refused while a published definition declares it)"
    )
    delete.add_argument("name", metavar="NAME")
    for verb in (put, delete):
        verb.add_argument(
            "--operation-id", default=None, help="repeat one to retry an earlier call (a UUID)"
        )
    for verb in (put, listing, delete):
        verb.add_argument("--host", required=True, help="the host id the secret belongs to")
        verb.add_argument("--config", default=None, help="YAML settings file ($WORKFLOW_CONFIG)")
        verb.add_argument("--database-url", default=None, help="overrides store.database_url")
