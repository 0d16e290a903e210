"""Typed, immutable workflow definition nodes of the executed DSL profile.

JSON fragments kept inside nodes (value trees, literals, schemas) are deep-frozen
(mappings become read-only proxies, lists tuples); ``thaw`` returns plain JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal

import jsonschema

from runtime.canonical.patterns import re2_validator

TaskKind = Literal[
    "set", "switch", "assert", "http", "mcp", "fork", "for", "try", "raise", "wait", "do", "ask"
]
ThenTarget = str  # "continue", "exit", "end" or a sibling task name
FLOW_DIRECTIVES = frozenset({"continue", "exit", "end"})


def freeze(value: Any) -> Any:
    """A read-only deep copy of a JSON value."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable JSON copy of a frozen value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class Schema:
    """An inline JSON Schema (2020-12) kept as canonical text, validated on demand."""

    text: str

    @classmethod
    def of(cls, document: Any) -> Schema:
        """Build from a JSON Schema document."""
        return cls(json.dumps(thaw(document), sort_keys=True, separators=(",", ":")))

    @cached_property
    def document(self) -> Any:
        """The schema as plain JSON."""
        return json.loads(self.text)

    @cached_property
    def validator(self) -> jsonschema.protocols.Validator:
        """A Draft 2020-12 validator for this schema, its patterns on RE2 (linear time)."""
        return re2_validator(self.document)

    def first_error(self, instance: Any) -> str | None:
        """A short description of the first violation, or None when valid."""
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(thaw(instance)))
        if error is None:
            return None
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        return f"{error.validator} violated at {where}"


@dataclass(frozen=True)
class Transform:
    """input.from / output.as / export.as: one expression, or an object-form value tree."""

    expression: str | None = None
    tree: Any = None

    @property
    def is_object_form(self) -> bool:
        """True for the object (value tree) form."""
        return self.expression is None


@dataclass(frozen=True)
class SetSpec:
    """`set`: a value tree or one expression that replaces the data."""

    value: Transform


@dataclass(frozen=True)
class SwitchCase:
    """One switch case; ``when`` None marks the default."""

    name: str
    when: str | None
    then: ThenTarget


@dataclass(frozen=True)
class SwitchSpec:
    """`switch`: first matching case wins."""

    cases: tuple[SwitchCase, ...]


@dataclass(frozen=True)
class AssertSpec:
    """The `assert` extension: ``value`` must equal ``equals`` (sugar for if + raise)."""

    value: Any
    equals: Any


@dataclass(frozen=True)
class RaiseSpec:
    """`raise`: an inline error whose title/detail may be expressions."""

    error: Any


@dataclass(frozen=True)
class WaitSpec:
    """`wait`: a literal duration."""

    duration_ms: int


CredentialScheme = Literal["runCredential", "bearer", "basic", "apiKey"]


@dataclass(frozen=True)
class CredentialPolicy:
    """A `use.authentications` policy as the runtime applies it: secrets by name, never values.

    runCredential: `Authorization: Bearer <the run's user token>`; bearer: the secret as a
    bearer token; basic: username (literal or secret) and password secret; apiKey: the secret
    as the value of `header`. Values are opened at dispatch and never enter the run's state.
    """

    name: str
    scheme: CredentialScheme
    secret: str | None = None
    username: str | None = None
    username_secret: str | None = None
    header: str = "authorization"

    @property
    def secrets(self) -> tuple[str, ...]:
        """The host secret names the policy reads."""
        return tuple(name for name in (self.username_secret, self.secret) if name is not None)


@dataclass(frozen=True)
class HttpCallSpec:
    """`call: http` with a literal or path-only-template endpoint."""

    method: str
    endpoint: str
    headers: Any
    query: Any
    body: Any
    output: Literal["content", "response", "raw"]
    redirect: bool
    authentication: str | None
    # The policy `authentication` names, resolved at parse time (None without one).
    credential: CredentialPolicy | None = None

    @property
    def is_write(self) -> bool:
        """A non-GET/HEAD call may change data."""
        return self.method not in ("GET", "HEAD")


@dataclass(frozen=True)
class McpCallSpec:
    """`call: mcp`, normalized to tools/call over http."""

    tool: str
    arguments: Any
    endpoint: str
    protocol_version: str
    client: Any
    # `transport.http.endpoint.authentication`: a policy adding its header to the Gateway call.
    authentication: str | None = None
    credential: CredentialPolicy | None = None


@dataclass(frozen=True)
class TaskList:
    """An ordered list of uniquely named tasks."""

    tasks: tuple[Task, ...]

    def index_of(self, name: str) -> int:
        """Position of a task by name."""
        for position, task in enumerate(self.tasks):
            if task.name == name:
                return position
        raise KeyError(name)


@dataclass(frozen=True)
class DoSpec:
    """`do`: a nested sequential list."""

    body: TaskList


@dataclass(frozen=True)
class ForkSpec:
    """`fork`: bounded parallel branches."""

    branches: TaskList
    compete: bool


@dataclass(frozen=True)
class ForSpec:
    """`for`: a bounded loop over a list."""

    each: str
    at: str
    collection: str
    while_: str | None
    body: TaskList
    max_items: int | None


@dataclass(frozen=True)
class RetryPolicy:
    """A bounded retry policy; ``attempt_count`` counts retries after the first attempt."""

    delay_ms: int
    backoff: Literal["constant", "linear", "exponential"]
    jitter_from_ms: int
    jitter_to_ms: int
    attempt_count: int | None
    limit_duration_ms: int | None
    attempt_duration_ms: int | None
    when: str | None
    except_when: str | None

    def delay_before_retry_ms(self, retry_number: int) -> int:
        """Delay before retry n (from 1), without jitter."""
        if self.backoff == "linear":
            return self.delay_ms * retry_number
        if self.backoff == "exponential":
            return int(self.delay_ms * 2**retry_number)
        return self.delay_ms


@dataclass(frozen=True)
class CatchSpec:
    """`catch` of a try task."""

    errors_with: Any
    as_: str
    when: str | None
    except_when: str | None
    retry: RetryPolicy | None
    body: TaskList | None


@dataclass(frozen=True)
class TrySpec:
    """`try`/`catch`."""

    body: TaskList
    catch: CatchSpec


@dataclass(frozen=True)
class AskOption:
    """One choice offered to the assignee of a human task."""

    label: str
    value: Any
    description: str | None = None


@dataclass(frozen=True)
class AskSpec:
    """`ask`: a human task (workflow_start runs only); the run parks until it is answered."""

    prompt: Any  # a string, possibly with `${ }` expressions
    mode: Literal["approval", "input"]
    # roleId, userId, positionId, categoryCode, reasonCode: literal strings, or `${ }`
    # strings computed once when the task opens.
    assignment: Mapping[str, str]
    options: tuple[AskOption, ...]
    required: bool
    timeout_ms: int | None
    # "default": answer with `default` when the timeout passes; "fail": the task faults.
    on_timeout: Literal["default", "fail"]
    default: Any = None


TaskSpec = (
    SetSpec
    | SwitchSpec
    | AssertSpec
    | RaiseSpec
    | WaitSpec
    | HttpCallSpec
    | McpCallSpec
    | DoSpec
    | ForkSpec
    | ForSpec
    | TrySpec
    | AskSpec
)


@dataclass(frozen=True)
class Compensation:
    """`compensate:` of a write task: what undoes its effect after the run fails.

    ``when`` "possible" also compensates an effect whose outcome is unknown; ``retry`` bounds
    how often a failing compensation is tried again (None: the runtime's setting).
    """

    body: TaskList
    when: Literal["confirmed", "possible"] = "confirmed"
    retry: RetryPolicy | None = None


@dataclass(frozen=True)
class Task:
    """One task with its common fields; ``pointer`` is its JSON Pointer in the definition."""

    name: str
    pointer: str
    qualified_name: str
    kind: TaskKind
    spec: TaskSpec
    if_: str | None = None
    input_from: Transform | None = None
    input_schema: Schema | None = None
    output_as: Transform | None = None
    output_schema: Schema | None = None
    export_as: Transform | None = None
    export_schema: Schema | None = None
    timeout_ms: int | None = None
    then: ThenTarget = "continue"
    metadata: Any = field(default_factory=lambda: MappingProxyType({}))
    compensate: Compensation | None = None

    def children(self) -> tuple[TaskList, ...]:
        """The nested task lists of a composite task (and of a write task's compensation)."""
        if self.compensate is not None:
            return (self.compensate.body,)
        spec = self.spec
        if isinstance(spec, DoSpec | ForSpec):
            return (spec.body,)
        if isinstance(spec, ForkSpec):
            return (spec.branches,)
        if isinstance(spec, TrySpec):
            lists = [spec.body]
            if spec.catch.body is not None:
                lists.append(spec.catch.body)
            return tuple(lists)
        return ()


@dataclass(frozen=True)
class WorkflowDefinition:
    """A parsed, validated and normalized workflow definition."""

    dsl: str
    namespace: str
    name: str
    version: str
    tasks: TaskList
    input_schema: Schema | None
    input_from: Transform | None
    output_schema: Schema | None
    output_as: Transform | None
    timeout_ms: int | None
    schedule: Any
    normalized: Any
    warnings: tuple[str, ...]
    # use.secrets: the host secrets the definition's authentication policies may read.
    secrets: tuple[str, ...] = ()

    def normalized_document(self) -> Any:
        """The normalized definition as plain JSON (shorthands and bare leaves rewritten)."""
        return thaw(self.normalized)


def walk_tasks(tasks: TaskList) -> list[Task]:
    """Every task in a list and, depth first, in its nested lists."""
    found: list[Task] = []
    for task in tasks.tasks:
        found.append(task)
        for child in task.children():
            found.extend(walk_tasks(child))
    return found
