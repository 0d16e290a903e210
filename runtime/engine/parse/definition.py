"""parse_definition: validate a YAML-loaded definition against the profile and normalize it."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from runtime.engine.model import Schema, TaskList, Transform, WorkflowDefinition
from runtime.engine.model import freeze as _freeze
from runtime.engine.parse.ask_placement import ask_placement_problems
from runtime.engine.parse.credentials import (
    SECRET_RULE,
    credential_header_problems,
    is_secret_read,
    parse_authentications,
    parse_secrets,
    secret_read_problems,
)
from runtime.engine.parse.definition_errors import DefinitionError
from runtime.engine.parse.durations import DurationError
from runtime.engine.parse.expression_checks import check_expressions
from runtime.engine.parse.light_workflow_hints import field_hint
from runtime.engine.parse.parse_context import ParseContext, parse_schema, parse_transform
from runtime.engine.parse.task_lists import parse_task_list

_TOP_LEVEL = {"document", "do", "input", "output", "use", "timeout", "schedule", "evaluate"}
_DOCUMENT_FIELDS = {"dsl", "namespace", "name", "version", "title", "summary", "tags", "metadata"}
_SEMVER = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
_NAME = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?$")
_ACCEPTED_DSL = {"1.0.0", "1.0.1", "1.0.2", "1.0.3"}
_USE_FIELDS = {"authentications", "errors", "retries", "timeouts", "secrets"}
_USE_REJECTED = {
    "extensions": "use.extensions add hidden behaviour",
    "catalogs": "use.catalogs fetch functions at run time",
    "functions": "custom functions cannot be resolved or bounded at publication",
}


_PLACEHOLDER_HEADER = {
    "dsl": "1.0.3",
    "namespace": "invalid",
    "name": "invalid",
    "version": "0.0.0",
}


def parse_definition(document: Any) -> WorkflowDefinition:
    """Validate and normalize an already-parsed definition, or raise DefinitionError.

    Every section and task is checked in one pass; the error lists each problem found
    (``DefinitionError.problems``), blockers first.
    """
    if not isinstance(document, Mapping):
        raise DefinitionError("a definition must be a mapping", pointer="/")
    raw = copy.deepcopy(dict(document))
    ctx = ParseContext(use={}, parse_list=parse_task_list)
    with ctx.collecting("/"):
        _reject_unknown_top_level(raw)
    header = dict(_PLACEHOLDER_HEADER)
    with ctx.collecting("/document"):
        header = _parse_document(raw.get("document"), ctx)
    with ctx.collecting("/evaluate"):
        _parse_evaluate(raw.get("evaluate"))
    with ctx.collecting("/use"):
        ctx.use = _parse_use(raw.get("use"), ctx)
    # Credentials written where no policy holds them, and secrets read anywhere but a policy.
    ctx.errors += credential_header_problems(raw.get("do"))
    ctx.errors += secret_read_problems(raw)
    input_schema, input_from = _collect_io(raw, "input", "from", ctx)
    output_schema, output_as = _collect_io(raw, "output", "as", ctx)
    tasks = TaskList(())
    with ctx.collecting("/do"):
        if "do" not in raw:
            raise DefinitionError("the definition needs a `do` task list", pointer="/do")
        tasks = parse_task_list(raw["do"], "/do", "", ctx)
    ctx.errors += ask_placement_problems(tasks)
    timeout_ms = None
    with ctx.collecting("/timeout"):
        timeout_ms = _parse_workflow_timeout(raw.get("timeout"), ctx)
    definition = WorkflowDefinition(
        dsl=header["dsl"],
        namespace=header["namespace"],
        name=header["name"],
        version=header["version"],
        tasks=tasks,
        input_schema=input_schema,
        input_from=input_from,
        output_schema=output_schema,
        output_as=output_as,
        timeout_ms=timeout_ms,
        schedule=_freeze(raw.get("schedule")),
        normalized=_freeze(raw),
        warnings=(),
        secrets=ctx.secrets,
    )
    # Identifier checks need the whole definition; with structural problems, only compile.
    warnings = check_expressions(definition, ctx.warnings, ctx.errors, identifiers=not ctx.errors)
    if ctx.errors:
        # A `$secrets` read is not CEL either; its own problem says why and what to do.
        errors = [e for e in ctx.errors if e.rule == SECRET_RULE or not is_secret_read(e)]
        raise DefinitionError.collected(errors)
    return replace(definition, warnings=tuple(warnings))


def _reject_unknown_top_level(raw: Mapping[str, Any]) -> None:
    unknown = set(raw) - _TOP_LEVEL
    if unknown:
        raise DefinitionError(
            f"unknown top-level fields: {', '.join(sorted(map(str, unknown)))}; "
            f"allowed: {', '.join(sorted(_TOP_LEVEL))}{field_hint(map(str, unknown))}",
            rule="unknown-field",
            pointer="/" + sorted(map(str, unknown))[0],
        )


def _collect_io(
    raw: dict[str, Any], field: str, transform_key: str, ctx: ParseContext
) -> tuple[Schema | None, Transform | None]:
    with ctx.collecting(f"/{field}"):
        return _parse_io(raw, field, transform_key, ctx)
    return None, None


def _parse_document(value: Any, ctx: ParseContext) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise DefinitionError("`document` is required and must be a mapping")
    unknown = sorted(map(str, set(value) - _DOCUMENT_FIELDS))
    if unknown:
        ctx.errors.append(
            DefinitionError(
                f"unknown document fields: {', '.join(unknown)}; put your own fields under "
                "document.metadata",
                rule="unknown-field",
                pointer=f"/document/{unknown[0]}",
            )
        )
    for key in ("dsl", "namespace", "name", "version"):
        if not isinstance(value.get(key), str):
            raise DefinitionError(f"document.{key} is required and must be a string")
    if value["dsl"] not in _ACCEPTED_DSL:
        raise DefinitionError(f"document.dsl {value['dsl']!r} is not one of 1.0.0–1.0.3")
    for key in ("namespace", "name"):
        if not _NAME.match(value[key]):
            raise DefinitionError(f"document.{key} must be 1–63 letters, digits or '-'")
    if not _SEMVER.match(value["version"]):
        raise DefinitionError("document.version must be a semantic version")
    tags = value.get("tags")
    if tags is not None and not (
        isinstance(tags, Mapping) and all(isinstance(v, str) for v in tags.values())
    ):
        raise DefinitionError("document.tags must be a map of strings")
    return {key: value[key] for key in ("dsl", "namespace", "name", "version")}


def _parse_evaluate(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping) or set(value) - {"language", "mode"}:
        raise DefinitionError("`evaluate` allows only language and mode")
    language = value.get("language", "cel")
    if not isinstance(language, str) or language.lower() != "cel":
        raise DefinitionError(
            f"expression language {language!r} is not supported; use cel",
            rule="rejected-construct",
            pointer="/evaluate/language",
        )
    if value.get("mode", "strict") != "strict":
        raise DefinitionError(
            "evaluate.mode must be strict; loose mode is rejected",
            rule="rejected-construct",
            pointer="/evaluate/mode",
        )


def _parse_use(value: Any, ctx: ParseContext) -> dict[str, Mapping[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DefinitionError("`use` must be a mapping")
    for key, reason in _USE_REJECTED.items():
        if key in value:
            raise DefinitionError(
                f"use.{key} is rejected: {reason}", rule="rejected-construct", pointer=f"/use/{key}"
            )
    unknown = set(value) - _USE_FIELDS
    if unknown:
        raise DefinitionError(
            f"unknown use fields: {', '.join(sorted(unknown))}{field_hint(map(str, unknown))}"
        )
    sections: dict[str, Mapping[str, Any]] = {}
    for key in ("authentications", "errors", "retries", "timeouts"):
        section = value.get(key, {})
        if not isinstance(section, Mapping):
            raise DefinitionError(f"use.{key} must be a mapping")
        sections[key] = section
    with ctx.collecting("/use/secrets"):
        ctx.secrets = parse_secrets(value.get("secrets"))
    ctx.credentials, problems = parse_authentications(sections["authentications"], ctx.secrets)
    ctx.errors += problems
    return sections


def _parse_io(
    raw: dict[str, Any], field: str, transform_key: str, ctx: ParseContext
) -> tuple[Schema | None, Transform | None]:
    value = raw.get(field)
    if value is None:
        return None, None
    if not isinstance(value, dict) or set(value) - {"schema", transform_key}:
        raise DefinitionError(f"workflow `{field}` allows only schema and {transform_key}")
    schema = parse_schema(value, field)
    transform = None
    if transform_key in value:
        where = f"/{field}/{transform_key}"
        transform = parse_transform(value[transform_key], where, ctx.warnings, value, transform_key)
    return schema, transform


def _parse_workflow_timeout(value: Any, ctx: ParseContext) -> int | None:
    if value is None:
        return None
    try:
        return ctx.timeout_ms(value)
    except DurationError as exc:
        raise DefinitionError(f"workflow timeout: {exc}") from None
