"""Shared parsing helpers: the parse context (use sections, warnings), schemas, transforms."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from runtime.canonical.patterns import PatternError, check_schema_patterns
from runtime.engine.cel.value_trees import expression_text, rewrite_leading_dot_leaves
from runtime.engine.model import CredentialPolicy, Schema, TaskList, Transform, freeze
from runtime.engine.parse.definition_errors import DefinitionError
from runtime.engine.parse.durations import DurationError, parse_duration_ms
from runtime.engine.parse.light_workflow_hints import field_hint

# parse_task_list(value, pointer, qualifier, ctx), handed in by the parser: composite kinds
# parse their bodies through it, so the per-kind parsers need not import the task parser.
ListParser = Callable[[Any, str, str, "ParseContext"], TaskList]


@dataclass
class ParseContext:
    """State shared while parsing one definition."""

    use: dict[str, Mapping[str, Any]]
    parse_list: ListParser
    warnings: list[str] = field(default_factory=list)
    errors: list[DefinitionError] = field(default_factory=list)
    # use.secrets and the use.authentications policies that parsed (by name).
    secrets: tuple[str, ...] = ()
    credentials: dict[str, CredentialPolicy] = field(default_factory=dict)

    @contextmanager
    def collecting(self, pointer: str | None = None) -> Iterator[None]:
        """Record a DefinitionError raised inside and go on, so one pass finds every problem.

        ``pointer`` locates a problem raised without one (a top-level section).
        """
        try:
            yield
        except DefinitionError as exc:
            if pointer is not None and not exc.pointer:
                exc.pointer = pointer
                exc.problems = (exc.problem(),)
            self.errors.append(exc)

    def task_list(self, value: Any, pointer: str, qualifier: str) -> TaskList:
        """Parse a nested task list (the body of a composite task)."""
        return self.parse_list(value, pointer, qualifier, self)

    def timeout_ms(self, value: Any) -> int:
        """A `timeout` value: {after: duration} or a use.timeouts name."""
        if isinstance(value, str):
            named = self.use.get("timeouts", {}).get(value)
            if named is None:
                raise DurationError(f"unknown use.timeouts name {value!r}")
            value = named
        if not isinstance(value, Mapping) or set(value) != {"after"}:
            raise DurationError("a timeout is {after: duration}")
        return parse_duration_ms(value["after"])


def require_mapping(value: Any, what: str, task: str | None = None) -> Mapping[str, Any]:
    """The value as a mapping, or a DefinitionError."""
    if not isinstance(value, Mapping):
        raise DefinitionError(f"{what} must be a mapping", task=task)
    return value


def reject_unknown(value: Mapping[str, Any], allowed: set[str], what: str, task: str) -> None:
    """Raise on any field outside ``allowed``."""
    unknown = set(value) - allowed
    if unknown:
        message = f"unknown fields in {what}: {', '.join(sorted(map(str, unknown)))}"
        allowed_text = ", ".join(sorted(allowed))
        raise DefinitionError(
            f"{message}; allowed: {allowed_text}{field_hint(map(str, unknown))}",
            task=task,
            rule="unknown-field",
        )


def parse_schema(holder: Mapping[str, Any], where: str) -> Schema | None:
    """An inline JSON schema, or None; external resources are rejected."""
    value = holder.get("schema")
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - {"format", "document", "resource"}:
        raise DefinitionError(f"{where}.schema must be {{format, document}}")
    if value.get("format", "json") != "json":
        raise DefinitionError(f"{where}.schema format must be json")
    if "resource" in value:
        raise DefinitionError(f"{where}.schema resource is rejected: only inline documents")
    document = value.get("document")
    if not isinstance(document, Mapping):
        raise DefinitionError(f"{where}.schema.document must be an inline JSON Schema object")
    try:
        jsonschema.Draft202012Validator.check_schema(document)
    except jsonschema.exceptions.SchemaError as exc:
        message = f"{where}.schema is not a valid JSON Schema: {exc.message}"
        raise DefinitionError(message) from None
    try:
        check_schema_patterns(document)
    except PatternError as exc:
        raise DefinitionError(f"{where}.schema: {exc}") from None
    return Schema.of(document)


def parse_transform(
    value: Any, where: str, warnings: list[str], holder: Any, key: str
) -> Transform:
    """A string-form expression or an object-form value tree (bare `.x` leaves rewritten)."""
    if isinstance(value, str):
        text = expression_text(value)
        return Transform(expression=text if text is not None else value.strip())
    if isinstance(value, Mapping | list):
        tree = rewrite_leading_dot_leaves(value, warnings, where)
        holder[key] = tree
        return Transform(tree=freeze(tree))
    raise DefinitionError(f"{where} must be an expression or an object")
