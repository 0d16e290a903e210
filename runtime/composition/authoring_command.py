"""`workflow-mcp draft` and `workflow-mcp check --fixtures` (issue 38).

`draft` runs the same service as workflow_definition_draft against the configured database and
authoring model, as an operator identity (`operator:<login>`, with the --role values given, so
Tools with a caller policy are filtered exactly as for a user holding those roles). It prints
the tool's output as JSON (or writes the definition text with --definition-out); nothing is
stored. `check --fixtures FILE` runs fixtures (the draft's `fixtures`, or any list of that shape)
against a definition file with the engine, offline, against stub Tools built from the output
schemas the file names under `toolOutputSchemas`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
from fastjsonschema import JsonSchemaValueException

from generated.models import AuthoringFixture, WorkflowDefinitionDraftInput
from generated.routes import ROUTES
from runtime.authoring import draft_definition, run_fixtures_blocking
from runtime.canonical import CanonicalError, load_definition_yaml, load_yaml_core
from runtime.composition.secrets import operator_context
from runtime.engine import DefinitionError, parse_definition
from runtime.errors import WorkflowError
from runtime.security import normalize_host_id
from runtime.settings import Settings
from runtime.store.bootstrap import open_store


def _fixtures_of(path: Path) -> tuple[list[AuthoringFixture], dict[str, Any]]:
    document = load_yaml_core(path.read_text(encoding="utf-8"))
    schemas: dict[str, Any] = {}
    if isinstance(document, dict):
        schemas = document.get("toolOutputSchemas") or {}
        document = document.get("fixtures", [])
    return msgspec.convert(document, list[AuthoringFixture]), schemas


def fixture_reports(files: Sequence[str], fixtures: str) -> tuple[int, list[dict[str, Any]]]:
    """Run the fixtures against each definition file: the exit code (0 when every one passes,
    1 when one fails, 2 when a file or the fixtures cannot be read) and one report per file."""
    try:
        cases, schemas = _fixtures_of(Path(fixtures))
    except (OSError, CanonicalError, msgspec.ValidationError) as error:
        return 2, [{"file": fixtures, "error": f"the fixtures cannot be read: {error}"}]
    reports: list[dict[str, Any]] = []
    code = 0
    for name in files:
        try:
            definition = parse_definition(load_definition_yaml(Path(name).read_text("utf-8")))
        except (OSError, CanonicalError, DefinitionError) as error:
            reports.append({"file": name, "error": f"cannot run fixtures: {error}"})
            code = 2
            continue
        results = run_fixtures_blocking(definition, cases, schemas)
        reports.append({"file": name, "results": msgspec.to_builtins(results)})
        if not all(result.passed for result in results):
            code = max(code, 1)
    return code, reports


def render_fixture_reports(reports: Sequence[dict[str, Any]]) -> str:
    """The human-readable fixture report."""
    lines: list[str] = []
    for report in reports:
        if "error" in report:
            lines.append(f"{report['file']}: {report['error']}")
            continue
        results = report["results"]
        passed = sum(result["passed"] for result in results)
        lines.append(f"{report['file']}: fixtures {passed}/{len(results)} passed")
        for result in results:
            mark = "pass" if result["passed"] else "FAIL"
            lines.append(f"  {mark} {result['category']}/{result['name']}: {result['message']}")
    return "\n".join(lines)


def with_fixtures(
    code: int, text: str, files: Sequence[str], fixtures: str, output_format: str
) -> tuple[int, str]:
    """The check's exit code and output with the fixture runs added (as `fixtures` in JSON)."""
    fixture_code, reports = fixture_reports(files, fixtures)
    code = max(code, fixture_code)
    if output_format == "json":
        body = json.loads(text) | {"fixtures": reports}
        body["exitCode"] = code
        return code, json.dumps(body, indent=2, ensure_ascii=False)
    return code, f"{text}\n{render_fixture_reports(reports)}"


def _request(args: argparse.Namespace, host: str) -> WorkflowDefinitionDraftInput:
    arguments: dict[str, Any] = {"hostId": host, "intent": args.intent, "toolIds": args.tool}
    if args.existing is not None:
        arguments["existingDefinition"] = Path(args.existing).read_text(encoding="utf-8")
    ROUTES["workflow_definition_draft"].validate_input(arguments)
    return msgspec.convert(arguments, WorkflowDefinitionDraftInput)


async def _draft(settings: Settings, args: argparse.Namespace, host: str) -> dict[str, Any]:
    request = _request(args, host)
    ctx = replace(operator_context(host), roles=frozenset(args.role or ["admin"]))
    store_settings = msgspec.structs.replace(settings.store, pool_min_size=1, pool_max_size=2)
    store = await open_store(store_settings, run_migrations=False)
    try:
        output = await draft_definition(store.database, settings.authoring, ctx, request)
    finally:
        await store.close(stop_embedded=False)
    result: dict[str, Any] = msgspec.to_builtins(output)
    return result


def draft_command(settings: Settings, args: argparse.Namespace) -> int:
    """Draft a definition from the command line; exit 0 with a draft, 1 when refused."""
    host = normalize_host_id(args.host)
    if host is None:
        print("--host must be a host id (a UUID)", file=sys.stderr)
        return 2
    try:
        output = asyncio.run(_draft(settings, args, host))
    except JsonSchemaValueException as error:
        print(f"WORKFLOW_INPUT_INVALID: {error.message}", file=sys.stderr)
        return 2
    except WorkflowError as error:
        print(f"{error.code.value}: {error.message}", file=sys.stderr)
        if error.details and "problems" in error.details:
            for problem in error.details["problems"]:
                print(
                    f"  {problem['pointer']} [{problem['rule']}] {problem['message']}",
                    file=sys.stderr,
                )
        return 1
    if args.definition_out:
        Path(args.definition_out).write_text(output["definition"], encoding="utf-8")
    print(json.dumps(output, indent=2, ensure_ascii=False))
    return 0


def add_draft_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `draft` command."""
    draft = commands.add_parser(
        "draft",
        help="draft a definition from selected Tools with the authoring model (stores nothing)",
        description="Runs workflow_definition_draft as an operator: the configured "
        "WORKFLOW_AUTHORING_LLM_* model drafts from the selected Tools' metadata; the "
        "deterministic validator and the fixtures run; the output is printed as JSON.",
    )
    draft.add_argument("--host", required=True, help="the host id the Tools belong to")
    draft.add_argument(
        "--tool", action="append", required=True, metavar="TOOLID", help="a selected Tool (repeat)"
    )
    draft.add_argument("--intent", required=True, help="the business objective")
    draft.add_argument(
        "--existing", default=None, metavar="FILE", help="an existing definition to revise"
    )
    draft.add_argument(
        "--role", action="append", default=None, help="a role to act with (repeat; default admin)"
    )
    draft.add_argument(
        "--definition-out", default=None, metavar="FILE", help="also write the definition text here"
    )
    draft.add_argument("--config", default=None, help="YAML settings file ($WORKFLOW_CONFIG)")
    draft.add_argument("--database-url", default=None, help="overrides store.database_url")
