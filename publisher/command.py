"""`workflow-mcp publish DIR`: options, credentials, and the run with its exit code.

Exit codes: 0 done (pending approvals and refusals included), 1 with --strict when a Tool is
not published, with --status when an acknowledged Tool drifted, with --rollback when Workflow
refused it; 2 the directory or the options cannot be used, 3 a call went unanswered
(transport failure; the ledger keeps it unconfirmed for the next run).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any, Final

import httpx

from publisher.client import DEFAULT_URL, WorkflowClient
from publisher.ledger import Ledger, LedgerBusy, exclusive
from publisher.payloads import Actor, endpoint_targets
from publisher.promotion import RollbackRefused, ledger_drift, rollback
from publisher.report import ProgressDisplay, render_status, render_table
from publisher.run import Publisher, RunResult
from publisher.spec import PublishDir, SpecError, load_dir
from runtime.binding_reach import EndpointTarget
from runtime.publication import BindingRuleViolation, DestinationPolicy, check_destination

EXIT_OK: Final = 0
EXIT_NOT_PUBLISHED: Final = 1
EXIT_USAGE: Final = 2
EXIT_TRANSPORT: Final = 3


class CredentialError(ValueError):
    """No usable token: the message says where one is looked for (never the token)."""


def add_publish_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `publish` (the caller sets its run function)."""
    run = commands.add_parser(
        "publish",
        help="publish a directory of definitions and Tool specs, write mcp-router.yml",
        description="Save and publish each pinned definition version, sync grants, publish each "
        "Tool's binding, and write mcp-router.yml from the receipts. Exit 0 unless a call went "
        "unanswered (3) or, with --strict, a Tool is not published (1).",
    )
    run.add_argument("directory", metavar="DIR", help="definitions and Tool specs (YAML)")
    run.add_argument("--url", default=DEFAULT_URL, help=f"the MCP endpoint (default {DEFAULT_URL})")
    run.add_argument(
        "--router", default=None, help="mcp-router.yml to write (DIR/../mcp-router.yml)"
    )
    run.add_argument("--host-id", default=None, help="the host (default: the token's host claim)")
    run.add_argument("--token", default=None, help="user bearer ($WORKFLOW_PUBLISH_TOKEN)")
    run.add_argument("--token-file", default=None, help="file holding the user bearer")
    run.add_argument(
        "--scope-token", default=None, help="X-Scope-Token bearer, when calling Workflow directly"
    )
    run.add_argument("--scope-token-file", default=None, help="file holding the scope bearer")
    run.add_argument("--strict", action="store_true", help="exit 1 unless every Tool is published")
    run.add_argument(
        "--status",
        action="store_true",
        help="show what is unconfirmed, and (with a token) the drift of every acknowledged Tool; "
        "exit 1 on drift",
    )
    run.add_argument(
        "--rollback",
        metavar="TOOL",
        default=None,
        help="make TOOL's previous approved revision active again and rewrite its router entry",
    )
    run.add_argument("--reason", default=None, help="why (required with --rollback)")
    run.add_argument(
        "--repin",
        metavar="BINDING_ID",
        action="append",
        default=None,
        help="with --rollback: a pending revision of a Tool that pins TOOL, approved with it",
    )
    run.add_argument(
        "--adopt-revisions",
        action="store_true",
        help="when Workflow holds a definition head revision this ledger does not know, save "
        "this directory's text above it",
    )
    run.add_argument(
        "--config",
        default=None,
        help="settings whose publication.destinations to check targets against",
    )


def _read_secret(value: str | None, file: str | None, env: str) -> str | None:
    if value:
        return value.strip()
    file = file or os.environ.get(f"{env}_FILE")
    if file:
        try:
            return Path(file).read_text(encoding="utf-8").strip() or None
        except OSError as error:
            raise CredentialError(f"cannot read the token file {file}: {error.strerror}") from None
    found = os.environ.get(env, "").strip()
    return found or None


def _claims(token: str) -> dict[str, Any]:
    """The unverified payload of a JWT (Workflow verifies it; this only reads host and user)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}
    return claims if isinstance(claims, dict) else {}


def actor_of(token: str, host_id: str | None) -> Actor:
    """hostId from --host-id or the token's host claim; the user from uid or sub."""
    claims = _claims(token)
    host = host_id or claims.get("host")
    user = claims.get("uid") or claims.get("sub")
    if not isinstance(host, str) or not host:
        raise CredentialError("no hostId: pass --host-id (the token has no host claim)")
    if not isinstance(user, str) or not user:
        raise CredentialError("the token names no user (uid or sub claim)")
    return Actor(host_id=host, user_id=user)


def _destination_problems(found: PublishDir, policy: DestinationPolicy) -> list[str]:
    problems = []
    for tool in found.tools:
        for target in endpoint_targets(tool):
            resolved = EndpointTarget(
                endpoint_ref=target["endpointRef"],
                endpoint_uri=target["endpointUri"],
                allowed_methods=tuple(target["allowedMethods"]),
                environments=tuple(target["environments"]),
                authorization_policy_digest=target["authorizationPolicyDigest"],
            )
            try:
                check_destination(resolved, policy)
            except BindingRuleViolation as violation:
                problems.append(f"{tool.path}: endpoint {target['endpointUri']}: {violation}")
    return problems


def run_publish(
    args: argparse.Namespace,
    *,
    destinations: DestinationPolicy | None = None,
    transport: httpx.BaseTransport | None = None,
    out: Any = None,
    err: Any = None,
) -> int:
    """The whole command; transport is for tests (an httpx transport to call through)."""
    out = out or sys.stdout
    err = err or sys.stderr
    directory = Path(args.directory)
    if args.status:
        return _status(args, directory, transport, out, err)
    if args.rollback is not None:
        return _rollback(args, directory, transport, out, err)
    try:
        found = load_dir(directory)
        token, scope, actor = _credentials(args)
    except (SpecError, CredentialError) as error:
        print(f"workflow-mcp publish: {error}", file=err)
        return EXIT_USAGE
    if destinations is not None:
        problems = _destination_problems(found, destinations)
        if problems:
            print("\n".join(f"workflow-mcp publish: {p}" for p in problems), file=err)
            return EXIT_USAGE
    router = Path(args.router) if args.router else directory.resolve().parent / "mcp-router.yml"
    client = WorkflowClient(args.url, token, scope, transport=transport)
    display = ProgressDisplay(err, 2 * len(found.tools) + 3 * len(found.heads()))
    try:
        with exclusive(directory):
            publisher = Publisher(
                found,
                Ledger.open(directory),
                client,
                actor,
                progress=display,
                adopt_revisions=args.adopt_revisions,
            )
            result = publisher.run(router)
    except LedgerBusy as busy:
        print(f"workflow-mcp publish: {busy}", file=err)
        return EXIT_USAGE
    finally:
        display.finish()
        client.close()
    print(render_table(result.outcomes), file=out)
    print(f"wrote {router}", file=out)
    return exit_code(result, strict=args.strict)


def _credentials(args: argparse.Namespace) -> tuple[str, str | None, Actor]:
    """The user bearer, the optional scope bearer, and the acting host and user."""
    token = _read_secret(args.token, args.token_file, "WORKFLOW_PUBLISH_TOKEN")
    if token is None:
        raise CredentialError("no user token: --token, --token-file or $WORKFLOW_PUBLISH_TOKEN")
    scope = _read_secret(args.scope_token, args.scope_token_file, "WORKFLOW_PUBLISH_SCOPE_TOKEN")
    return token, scope, actor_of(token, args.host_id)


def _status(args: argparse.Namespace, directory: Path, transport: Any, out: Any, err: Any) -> int:
    """The ledger's unconfirmed work; with a token, each acknowledged Tool's drift (exit 1)."""
    ledger = Ledger.open(directory)
    print(render_status(ledger), file=out)
    if not any(ack.status == "active" for ack in ledger.data.tools.values()):
        return EXIT_OK
    try:
        token, scope, actor = _credentials(args)
    except CredentialError as error:
        print(f"drift not checked: {error}", file=out)
        return EXIT_OK
    client = WorkflowClient(args.url, token, scope, transport=transport)
    try:
        found = ledger_drift(ledger, client, actor.host_id)
    except RollbackRefused as refused:
        print(f"workflow-mcp publish: drift not checked: {refused}", file=err)
        return EXIT_TRANSPORT if refused.transport else EXIT_NOT_PUBLISHED
    finally:
        client.close()
    for line in found:
        print(f"drift         {line.tool}: {line.kind} {line.subject}: {line.message}", file=out)
    if not found:
        print("no drift", file=out)
    return EXIT_NOT_PUBLISHED if found else EXIT_OK


def _rollback(args: argparse.Namespace, directory: Path, transport: Any, out: Any, err: Any) -> int:
    """`--rollback TOOL --reason TEXT`: 0 rolled back, 1 refused, 2 usage, 3 no answer."""
    name = args.rollback
    try:
        if not args.reason or not args.reason.strip():
            raise CredentialError("--rollback needs --reason (it is kept in the history)")
        found = load_dir(directory)
        token, scope, actor = _credentials(args)
    except (SpecError, CredentialError) as error:
        print(f"workflow-mcp publish: {error}", file=err)
        return EXIT_USAGE
    spec = next((tool for tool in found.tools if tool.name == name), None)
    router = Path(args.router) if args.router else directory.resolve().parent / "mcp-router.yml"
    client = WorkflowClient(args.url, token, scope, transport=transport)
    try:
        with exclusive(directory):
            result = rollback(
                Ledger.open(directory),
                client,
                actor,
                name=name,
                tool_id=None if spec is None else spec.tool_id,
                reason=args.reason.strip(),
                repins=tuple(args.repin or ()),
                router_path=router,
                spec_roles=None if spec is None else tuple(spec.roles),
            )
    except LedgerBusy as busy:
        print(f"workflow-mcp publish: {busy}", file=err)
        return EXIT_USAGE
    except RollbackRefused as refused:
        print(f"workflow-mcp publish: rollback of {name} refused: {refused}", file=err)
        return EXIT_TRANSPORT if refused.transport else EXIT_NOT_PUBLISHED
    finally:
        client.close()
    receipt = result.receipt
    print(
        f"{name}  Rolled back to version {receipt['workflowVersion']} "
        f"(bindingDigest {receipt['bindingDigest']})",
        file=out,
    )
    for note in result.notes:
        print(f"note: {note}", file=out)
    print(f"wrote {router}", file=out)
    return EXIT_OK


def exit_code(result: RunResult, *, strict: bool) -> int:
    """3 after a transport failure, 1 under --strict when a Tool is not published, else 0."""
    if result.transport_failed:
        return EXIT_TRANSPORT
    if strict and any(o.status != "published" for o in result.outcomes):
        return EXIT_NOT_PUBLISHED
    return EXIT_OK
