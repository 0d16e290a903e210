"""Every input-schema problem of refused tool arguments, for the refusal's details.problems.

The generated (fastjsonschema) validator stays the one gate and stops at the first violation;
only once it has refused does this module run the same catalog schema through jsonschema
(Draft 2020-12, patterns on RE2 as everywhere caller input meets a pattern) to list the rest,
so an author fixes every mistake at once (issue 11 item 2). Messages name locations, rules and
schema values, never the caller's values; collection stops at a cap so a hostile argument
object cannot make the refusal slow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import jsonschema
import msgspec

from generated.routes import ToolRoute
from runtime.canonical.patterns import compile_pattern, re2_validator
from runtime.mcp.schema_keywords import bounded

# How many problems a refusal lists (as binding and definition publish).
MAX_LISTED: Final = 200
# How many raw schema errors are read before ordering: enough that ordering is meaningful,
# few enough that a hostile 1 MB argument object cannot make the refusal path slow.
MAX_COLLECTED: Final = 1000
# A caller-chosen member name longer than this is cut in pointers and messages.
MAX_NAME: Final = 128

# What an author fixes first: missing and mistyped members, then unknown ones, then values
# outside an allowed set; bounds (lengths, patterns, ranges) come last.
_RANKS: Final = {
    "required": 0,
    "type": 0,
    "additionalProperties": 1,
    "enum": 2,
    "const": 2,
    "oneOf": 2,
    "anyOf": 2,
    "allOf": 2,
    "not": 2,
}
_BOUNDS_RANK: Final = 3


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """One violation: a JSON pointer into the arguments, the failing keyword, and a message."""

    pointer: str
    rule: str
    message: str

    def as_json(self) -> dict[str, str]:
        """The `details.problems` item: {pointer, rule, message}."""
        return {"pointer": self.pointer, "rule": self.rule, "message": self.message}


@dataclass(frozen=True, slots=True)
class SchemaProblems:
    """The listed problems (the validator's own first), how many were found, whether capped."""

    listed: tuple[SchemaProblem, ...]
    found: int
    # How many of them the validator's own message already names (all missing members of one
    # object, say): the message counts only the others.
    named: int = 1
    capped: bool = False

    def suffix(self) -> str:
        """What the refusal message adds after the first problem ("" when it is the only one)."""
        more = self.found - self.named
        if self.capped:
            return f" (and at least {more} more problems; see details.problems)"
        if more <= 0:
            return ""
        return f" (and {more} more problems; see details.problems)"


def _rank(problem: SchemaProblem) -> int:
    return _RANKS.get(problem.rule, _BOUNDS_RANK)


def _token(part: str | int) -> str:
    text = str(part)
    if len(text) > MAX_NAME:
        text = text[:MAX_NAME] + "..."
    return text.replace("~", "~0").replace("/", "~1")


def pointer_of(path: Iterable[str | int]) -> str:
    """The RFC 6901 pointer of a path into the arguments ("" is the whole object)."""
    return "".join(f"/{_token(part)}" for part in path)


def _location(path: Sequence[str | int]) -> str:
    # The dotted form the generated validator's messages use: data.dependencies[0].uri
    parts = ["data"]
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            name = part if len(part) <= MAX_NAME else part[:MAX_NAME] + "..."
            parts.append(f".{name}")
    return "".join(parts)


def _schema_value(value: Any) -> str:
    return msgspec.json.encode(value).decode()[:200]


_PREDICATES: Final[dict[str, str]] = {
    "minLength": "must be longer than or equal to {} characters",
    "maxLength": "must be shorter than or equal to {} characters",
    "pattern": "must match pattern {}",
    "minimum": "must be bigger than or equal to {}",
    "maximum": "must be smaller than or equal to {}",
    "exclusiveMinimum": "must be bigger than {}",
    "exclusiveMaximum": "must be smaller than {}",
    "minItems": "must contain at least {} items",
    "maxItems": "must contain at most {} items",
    "minProperties": "must contain at least {} members",
    "maxProperties": "must contain at most {} members",
    "multipleOf": "must be a multiple of {}",
}


def _described(rule: str, value: Any, where: str) -> str:
    """The message of one keyword's violation: the location and what the schema asks."""
    if rule == "type":
        return f"{where} must be {' or '.join(value) if isinstance(value, list) else value}"
    if rule == "enum":
        return f"{where} must be one of {_schema_value(value)}"
    if rule == "const":
        return f"{where} must be {_schema_value(value)}"
    if rule == "uniqueItems":
        return f"{where} must contain unique items"
    predicate = _PREDICATES.get(rule)
    if predicate is None:
        return f"{where} does not satisfy {rule}"
    return f"{where} {predicate.format(str(value)[:200])}"


def _required(error: jsonschema.ValidationError) -> list[SchemaProblem]:
    # jsonschema yields one error per missing member; the name is the schema's, not the input's.
    path = list(error.absolute_path)
    for name in error.validator_value:
        if isinstance(name, str) and error.message == f"{name!r} is a required property":
            where = _location([*path, name])
            return [SchemaProblem(pointer_of([*path, name]), "required", f"{where} is required")]
    return []


def _is_known(name: str, schema: Mapping[str, Any]) -> bool:
    patterns = schema.get("patternProperties", {})
    return name in schema.get("properties", {}) or any(
        compile_pattern(pattern).search(name) is not None for pattern in patterns
    )


def _unknown(error: jsonschema.ValidationError, room: int) -> tuple[list[SchemaProblem], int]:
    """One problem per unknown member (up to room of them), and how many there are."""
    path = list(error.absolute_path)
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    names = [name for name in instance if not _is_known(name, schema)]
    problems = [
        SchemaProblem(
            pointer_of([*path, name]),
            "additionalProperties",
            f"{_location([*path, name])} is not allowed (unknown field)",
        )
        for name in names[:room]
    ]
    return problems, len(names)


def _problems_of(error: jsonschema.ValidationError, room: int) -> tuple[list[SchemaProblem], int]:
    """The problems one schema error stands for (at most room of them), and how many."""
    rule = str(error.validator)
    if rule == "additionalProperties":
        return _unknown(error, room)
    if rule == "required":
        problems = _required(error)
    else:
        path = list(error.absolute_path)
        message = _described(rule, error.validator_value, _location(path))
        problems = [SchemaProblem(pointer_of(path), rule, message)]
    return problems[:room], len(problems)


# Built on a route's first refusal (checking the schema and compiling its patterns costs more
# than validating), then reused: routes are fixed for the life of the process.
_VALIDATORS: dict[str, jsonschema.protocols.Validator] = {}


def _validator(route: ToolRoute) -> jsonschema.protocols.Validator:
    validator = _VALIDATORS.get(route.name)
    if validator is None:
        validator = bounded(re2_validator(dict(route.input_schema)))
        _VALIDATORS[route.name] = validator
    return validator


@dataclass(frozen=True, slots=True)
class _Found:
    problems: list[SchemaProblem]
    count: int  # every problem of the errors read, listed or not
    capped: bool  # more errors than were read


def _found(route: ToolRoute, arguments: Any) -> _Found:
    """Up to MAX_COLLECTED problems in schema order, counted, from at most MAX_COLLECTED errors.

    One object's unknown members are one error: at most MAX_LISTED of them become problems,
    so the members a later keyword finds missing still make the list.
    """
    problems: list[SchemaProblem] = []
    count = 0
    errors = _validator(route).iter_errors(arguments)
    for read, error in enumerate(errors):
        if read == MAX_COLLECTED:
            return _Found(problems, count, capped=True)
        room = min(MAX_LISTED, MAX_COLLECTED - len(problems))
        listed, found = _problems_of(error, room)
        problems.extend(listed)
        count += found
    return _Found(problems, count, capped=False)


def _led_by(first: SchemaProblem, problem: SchemaProblem) -> bool:
    """Whether the validator's first failure already names this problem."""
    if problem.rule != first.rule:
        return False
    if problem.pointer == first.pointer:
        return True
    # The generated validator names every missing (or unknown) member of one object at once.
    parent = problem.pointer.rsplit("/", 1)[0]
    return first.rule in ("required", "additionalProperties") and parent == first.pointer


def collect(route: ToolRoute, arguments: Any, first: SchemaProblem) -> SchemaProblems:
    """Every problem of refused arguments: the validator's own first, then shape before bounds.

    ``first`` is the generated validator's failure, so the refusal still names what it named.
    A schema jsonschema cannot run leaves just that one.
    """
    try:
        found = _found(route, arguments)
    except (jsonschema.SchemaError, ValueError, RecursionError):
        return SchemaProblems((first,), 1)
    lead = [problem for problem in found.problems if _led_by(first, problem)]
    rest = sorted((p for p in found.problems if not _led_by(first, p)), key=_rank)
    count = found.count
    if not lead:
        lead, count = [first], count + 1
    listed = tuple([*lead, *rest][:MAX_LISTED])
    return SchemaProblems(listed, count, len(lead), found.capped)
