"""The publish directory: definitions (the DSL as published) and short Tool specs.

A YAML file with a top-level ``document`` is a definition; one with a top-level ``tool`` is a
Tool spec. A spec names only what differs from the documented defaults (docs/PUBLISHING.md,
"Publishing with `workflow-mcp publish`"); everything else is filled here. Stable ids are
derived (uuid5 under NAMESPACE), so every run, on every machine, sends the same ids.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from gateway.router import DEFAULT_ROLES, RESERVED_NAMES
from runtime.canonical import (
    CanonicalError,
    definition_digest,
    input_schema_of,
    load_definition_yaml,
    load_yaml_core,
    schema_digest,
)
from runtime.engine import (
    HttpCallSpec,
    WorkflowDefinition,
    mcp_calls,
    parse_definition,
    static_requirements,
    walk_tasks,
)
from runtime.errors import WorkflowError
from runtime.publication import validate_definition

# The namespace of every derived id: uuid5(NAMESPACE, "<kind>:<name>").
NAMESPACE = uuid.UUID("6f1c3a52-8d4e-5b7a-9c20-7e4d1b2a3f60")
WRITE_REPLAY_MS = 600_000
# The approval evidence form Workflow accepts on a write task (its binding field rules).
EVIDENCE_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
DEFAULT_RUNTIME_BOUNDS: dict[str, int] = {
    "maximumTaskAttempts": 8,
    "maximumNestedCalls": 4,
    "maximumParallelism": 4,
    "maximumRequestBytes": 65536,
    "maximumIntermediateBytes": 1048576,
    "maximumResultBytes": 65536,
    "maximumCostUnits": 100,
}
DEFAULT_ADMISSION_LIMITS: dict[str, int] = {
    "maximumConcurrentRuns": 20,
    "maximumConcurrentRunsPerUser": 2,
    "startsPerMinute": 120,
    "startsPerMinutePerUser": 10,
}
DEFAULT_ENVIRONMENTS = ("dev",)


class SpecError(ValueError):
    """A directory that cannot be published: the message names the file and the field."""


def derived_id(kind: str, name: str) -> str:
    """The stable id of a definition (kind "workflow"), Tool ("tool") or binding ("binding")."""
    return str(uuid.uuid5(NAMESPACE, f"{kind}:{name}"))


class Owner(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """The definition owner sent with save and publish."""

    user_id: str
    position_id: str | None = None


class GrantSpec(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    """A Tool this workflow may call through LightAPI (the grantId is derived)."""

    tool_id: str
    tool_version: str
    lightapi_digest: str
    allowed_environments: list[str] = msgspec.field(default_factory=lambda: ["dev"])


class Annotations(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    """The Tool's effect annotations; readOnly defaults to "the workflow writes nothing"."""

    read_only: bool | None = None
    destructive: bool = False
    human_approval_required: bool | None = None
    idempotent: bool | None = None


class LightspeedSpec(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    """`lightspeed:` of a Tool spec: the binding's lightspeedReceiver (docs/LIGHTSPEED.md)."""

    tool_id: str
    universes: list[str]
    receiver_workflow_id: str


class ToolSpec(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    """One Tool spec file as written (every field but tool and workflow is optional)."""

    tool: str
    workflow: str
    description: str = ""
    version: str | None = None
    tool_id: str | None = None
    definition_owner: Owner | None = None
    roles: list[str] | None = None
    grants: list[GrantSpec] = msgspec.field(default_factory=list)
    dependencies: list[dict[str, Any]] = msgspec.field(default_factory=list)
    endpoint_targets: list[dict[str, Any]] | None = None
    environments: list[str] | None = None
    sync_wait_ms: int = 20000
    total_deadline_ms: int = 30000
    result_text_mode: Literal["compact-json", "summary"] = "compact-json"
    cancellation_policy: Literal["before-effects-only", "cooperative", "disabled"] = (
        "before-effects-only"
    )
    idempotency_kind: Literal["derived", "explicit", "business"] = "derived"
    result_replay_ms: int | None = None
    maximum_delegation_depth: int = 1
    runtime_bounds: dict[str, int] = msgspec.field(default_factory=dict)
    admission_limits: dict[str, int] = msgspec.field(default_factory=dict)
    caller_policy: dict[str, Any] = msgspec.field(default_factory=dict)
    annotations: Annotations = msgspec.field(default_factory=Annotations)
    policy_digest: str | None = None
    response_policy_digest: str | None = None
    # Seed 003 (issue 37): the Lightspeed workflow tool this Tool serves as receiver.
    lightspeed: LightspeedSpec | None = None


@dataclass(frozen=True)
class Definition:
    """One definition file: its text, identity, digests and what a binding needs from it."""

    path: Path
    text: str
    document: dict[str, Any]
    namespace: str
    name: str
    version: str
    definition_digest: str
    schema_digest: str
    parsed: WorkflowDefinition

    @property
    def key(self) -> str:
        """namespace/name: one saved head and one wfDefId per key."""
        return f"{self.namespace}/{self.name}"

    @property
    def wf_def_id(self) -> str:
        """The derived wfDefId."""
        return derived_id("workflow", self.key)

    @property
    def input_schema(self) -> dict[str, Any]:
        """The input schema the Gateway validates arguments with ({"type": "object"} if none)."""
        schema = input_schema_of(self.document)
        return dict(schema) if isinstance(schema, dict) and schema else {"type": "object"}

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The declared output schema, when there is one."""
        section = self.document.get("output")
        schema = section.get("schema") if isinstance(section, dict) else None
        if isinstance(schema, dict) and isinstance(schema.get("document"), dict):
            return dict(schema["document"])
        return None


@dataclass(frozen=True)
class Tool:
    """A Tool spec with its defaults filled and its definition resolved."""

    spec: ToolSpec
    path: Path
    definition: Definition
    roles: tuple[str, ...]

    @property
    def name(self) -> str:
        """The Tool's MCP name."""
        return self.spec.tool

    @property
    def tool_id(self) -> str:
        """toolId (the Gateway's stableToolRef): the spec's, else derived from the name."""
        return self.spec.tool_id or derived_id("tool", self.name)

    @property
    def writes(self) -> bool:
        """True when the workflow has a write task: a non-GET/HEAD HTTP call, or an MCP call
        to a Tool its dependencies do not mark readOnly (so the Tool is a write Tool)."""
        return bool(self._write_tasks())

    def tasks_without_evidence(self) -> list[str]:
        """Write tasks without a well-formed metadata.approvalEvidenceDigest, as `name (what)`."""
        return [
            f"{task.qualified_name} ({task.kind} {task.target})"
            for task in self._write_tasks()
            if not EVIDENCE_DIGEST.match(task.approval_evidence_digest or "")
        ]

    def _write_tasks(self) -> tuple[Any, ...]:
        read_only = {
            str(name)
            for dependency in self.spec.dependencies
            if (dependency.get("toolAnnotations") or {}).get("readOnly") is True
            for name in (dependency.get("authorizationToolName"), dependency.get("dispatchTarget"))
            if name
        }
        requirements = static_requirements(self.definition.parsed, read_only_tools=read_only)
        return tuple(requirements.write_tasks)

    @property
    def source_binding_id(self) -> str:
        """The publisher's own binding id, derived from the Tool name."""
        return derived_id("binding", self.name)


@dataclass
class PublishDir:
    """Everything a run publishes, in file-name order."""

    directory: Path
    definitions: list[Definition] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)

    def heads(self) -> dict[str, Definition]:
        """The text each saved head gets: the highest version pinned (or present) per key."""
        heads: dict[str, Definition] = {}
        for definition in self.definitions:
            current = heads.get(definition.key)
            if current is None or _version_key(definition.version) > _version_key(current.version):
                heads[definition.key] = definition
        return heads


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    return tuple(
        (0, int(p)) if p.isdigit() else (1, p) for p in version.replace("-", ".").split(".")
    )


def _load_definition(path: Path, text: str, document: dict[str, Any]) -> Definition:
    try:
        validate_definition(document)
    except WorkflowError as error:
        raise SpecError(f"{path}: publication would refuse it: {error.message}") from None
    meta = document.get("document") or {}
    try:
        namespace, name, version = (str(meta[k]) for k in ("namespace", "name", "version"))
    except KeyError as missing:
        raise SpecError(f"{path}: document.{missing.args[0]} is required") from None
    return Definition(
        path=path,
        text=text,
        document=document,
        namespace=namespace,
        name=name,
        version=version,
        definition_digest=definition_digest(document),
        schema_digest=schema_digest(document),
        parsed=parse_definition(document),
    )


def _read_yaml(path: Path) -> tuple[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
        return text, load_yaml_core(text.encode("utf-8"))
    except OSError as error:
        raise SpecError(f"{path}: cannot read: {error.strerror}") from None
    except (CanonicalError, UnicodeDecodeError) as error:
        raise SpecError(f"{path}: not YAML the publisher reads: {error}") from None


def _convert_spec(path: Path, document: dict[str, Any]) -> ToolSpec:
    try:
        return msgspec.convert(document, ToolSpec)
    except msgspec.ValidationError as error:
        raise SpecError(f"{path}: {error}") from None


def _resolve(directory: Path, spec: ToolSpec, path: Path, found: PublishDir) -> Definition:
    by_file = {d.path.resolve(): d for d in found.definitions}
    candidate = (directory / spec.workflow).resolve()
    if candidate in by_file:
        definition = by_file[candidate]
        if spec.version is not None and spec.version != definition.version:
            raise SpecError(
                f"{path}: version {spec.version!r} differs from {spec.workflow}'s "
                f"document.version {definition.version!r}"
            )
        return definition
    matches = [
        d
        for d in found.definitions
        if d.key == spec.workflow and (spec.version is None or d.version == spec.version)
    ]
    if len(matches) != 1:
        wanted = spec.workflow + ("" if spec.version is None else f" version {spec.version}")
        reason = "no definition file" if not matches else "several versions (give `version`)"
        raise SpecError(f"{path}: workflow {wanted}: {reason} in {directory}")
    return matches[0]


def _check_tool(path: Path, tool: Tool) -> None:
    spec = tool.spec
    if spec.tool in RESERVED_NAMES:
        raise SpecError(f"{path}: tool {spec.tool!r} is a reserved name")
    if tool.writes and (spec.result_replay_ms or WRITE_REPLAY_MS) < WRITE_REPLAY_MS:
        raise SpecError(
            f"{path}: resultReplayMs must be at least {WRITE_REPLAY_MS} for a write Tool "
            "(its workflow has write tasks): a client retry must replay, not write twice"
        )
    missing = tool.tasks_without_evidence() if tool.writes else []
    if missing:
        # Checked before any call: Workflow would publish the definition version first and
        # then refuse the binding, and a published version can no longer take the evidence.
        raise SpecError(
            f"{path}: write task {', '.join(missing)} of {tool.definition.path.name} has no "
            "metadata.approvalEvidenceDigest: a write Tool needs the sha256 digest of your "
            "review of each write (sha256:<64 hex digits>) on the task; add it to the "
            "definition (a converted light-workflow file: workflow-mcp convert --evidence "
            "TASK=sha256:...) before publishing"
        )
    for call in mcp_calls(tool.definition.parsed):
        names = {d.get("authorizationToolName") for d in spec.dependencies}
        if call.tool not in names:
            raise SpecError(
                f"{path}: the workflow calls tool {call.tool}: add a `dependencies` entry"
            )


def load_dir(directory: Path) -> PublishDir:
    """Read every YAML file of directory; SpecError names the first file that cannot be used."""
    if not directory.is_dir():
        raise SpecError(f"{directory}: not a directory")
    found = PublishDir(directory)
    specs: list[tuple[Path, ToolSpec]] = []
    files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml"))
    for path in files:
        text, document = _read_yaml(path)
        if isinstance(document, dict) and "document" in document:
            try:
                loaded = load_definition_yaml(text.encode("utf-8"))
            except CanonicalError as error:
                raise SpecError(f"{path}: {error.message}") from None
            found.definitions.append(_load_definition(path, text, loaded))
        elif isinstance(document, dict) and "tool" in document:
            specs.append((path, _convert_spec(path, document)))
        else:
            raise SpecError(f"{path}: neither a definition (`document:`) nor a Tool spec (`tool:`)")
    _check_unique(found.definitions)
    names: set[str] = set()
    for path, spec in specs:
        if spec.tool in names:
            raise SpecError(f"{path}: tool {spec.tool!r} is specified twice")
        names.add(spec.tool)
        definition = _resolve(directory, spec, path, found)
        roles = tuple(spec.roles) if spec.roles is not None else DEFAULT_ROLES
        tool = Tool(spec=spec, path=path, definition=definition, roles=roles)
        _check_tool(path, tool)
        found.tools.append(tool)
    _check_owners(found.tools)
    return found


def _check_unique(definitions: list[Definition]) -> None:
    seen: dict[tuple[str, str], Path] = {}
    for definition in definitions:
        key = (definition.key, definition.version)
        if key in seen:
            raise SpecError(
                f"{definition.path}: {definition.key} version {definition.version} is also "
                f"in {seen[key]}"
            )
        seen[key] = definition.path


def _check_owners(tools: list[Tool]) -> None:
    owners: dict[str, tuple[Owner, Path]] = {}
    for tool in tools:
        owner = tool.spec.definition_owner
        if owner is None:
            continue
        key = tool.definition.key
        if key in owners and owners[key][0] != owner:
            raise SpecError(
                f"{tool.path}: definitionOwner of {key} differs from the one in {owners[key][1]}"
            )
        owners[key] = (owner, tool.path)


def definition_owner(tools: list[Tool], key: str) -> Owner | None:
    """The owner a spec declares for the definition key (None: the acting user)."""
    for tool in tools:
        if tool.definition.key == key and tool.spec.definition_owner is not None:
            return tool.spec.definition_owner
    return None


def http_targets(definition: Definition) -> list[tuple[str, str, str | None]]:
    """(method, endpoint, authentication policy) of every HTTP call, in document order."""
    return [
        (task.spec.method.upper(), task.spec.endpoint, task.spec.authentication)
        for task in walk_tasks(definition.parsed.tasks)
        if isinstance(task.spec, HttpCallSpec)
    ]
