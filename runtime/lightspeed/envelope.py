"""The envelope family of seed 003, parsed strictly and written back in its serde form.

EmissionEnvelope{emission_id, producer, body} with a closed set of four body kinds (E5),
WorkflowToolStartArgs and WorkflowToolRecoveryResult. Members the upstream schema does not name
are ignored, as serde does; every member it does name is checked by type and width, and the
written form carries optional members as null (the form of the upstream reference envelopes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.lightspeed import fields as f
from runtime.lightspeed.errors import ContractError
from runtime.lightspeed.ids import REPLY_KEY, is_emission_id

BODY_KINDS = ("run_terminal", "source_resolution", "tool_invocation", "invocation_cancellation")
PRODUCER_KINDS = ("session", "workflow")
RESOLUTION_KINDS = ("resolved", "failed", "cancelled")
RUN_STATUSES = ("active", "parked", "cancelling", "completed", "failed", "cancelled")


@dataclass(frozen=True)
class Producer:
    """Who emitted: a session (with its exact log_seq) or a workflow (E11)."""

    kind: str
    universe_id: str
    session_id: str | None = None
    log_seq: int | None = None
    workflow_id: str | None = None

    def document(self) -> dict[str, Any]:
        """The serde form."""
        if self.kind == "session":
            return {
                "kind": "session",
                "universe_id": self.universe_id,
                "session_id": self.session_id,
                "log_seq": self.log_seq,
            }
        return {
            "kind": "workflow",
            "universe_id": self.universe_id,
            "workflow_id": self.workflow_id,
        }


@dataclass(frozen=True)
class Resolution:
    """How a Promise ended: resolved (payload_ref), failed (error_ref) or cancelled."""

    kind: str
    ref: str | None = None

    def document(self) -> dict[str, Any]:
        """The serde form."""
        if self.kind == "resolved":
            return {"kind": "resolved", "payload_ref": self.ref}
        if self.kind == "failed":
            return {"kind": "failed", "error_ref": self.ref}
        return {"kind": "cancelled"}


@dataclass(frozen=True)
class Invocation:
    """One WorkflowToolInvocation: the model's arguments stay in CAS at arguments_ref (E9)."""

    invocation_id: str
    tool_id: str
    semantic_type: str
    schema_revision: int
    binding_fingerprint: str
    session_universe_id: str
    session_id: str
    run_id: int
    turn_id: int
    tool_batch_id: int
    tool_call_id: str
    arguments_ref: str
    completion_promises: dict[str, str]
    execution_context_ref: str | None

    @property
    def reply_promise(self) -> str:
        """The one receiver-visible Promise, under the reserved key `reply` (E15)."""
        return self.completion_promises[REPLY_KEY]

    def document(self) -> dict[str, Any]:
        """The serde form (members in the upstream reference order)."""
        return {
            "arguments_ref": self.arguments_ref,
            "binding_fingerprint": self.binding_fingerprint,
            "completion_promises": dict(self.completion_promises),
            "execution_context_ref": self.execution_context_ref,
            "invocation_id": self.invocation_id,
            "run_id": self.run_id,
            "schema_revision": self.schema_revision,
            "semantic_type": self.semantic_type,
            "session_id": self.session_id,
            "session_universe_id": self.session_universe_id,
            "tool_batch_id": self.tool_batch_id,
            "tool_call_id": self.tool_call_id,
            "tool_id": self.tool_id,
            "turn_id": self.turn_id,
        }


@dataclass(frozen=True)
class Body:
    """One tagged body; which members are set depends on kind."""

    kind: str
    fields: dict[str, Any]
    invocation: Invocation | None = None
    resolution: Resolution | None = None

    def document(self) -> dict[str, Any]:
        """The serde form."""
        document: dict[str, Any] = {"kind": self.kind, **self.fields}
        if self.invocation is not None:
            document["invocation"] = self.invocation.document()
        if self.resolution is not None:
            document["resolution"] = self.resolution.document()
        return document


@dataclass(frozen=True)
class Envelope:
    """The sole argument of deliver_emission (E1)."""

    emission_id: str
    producer: Producer
    body: Body

    def document(self) -> dict[str, Any]:
        """The serde form."""
        return {
            "emission_id": self.emission_id,
            "producer": self.producer.document(),
            "body": self.body.document(),
        }


@dataclass(frozen=True)
class StartArgs:
    """WorkflowToolStartArgs: what a start-on-call execution receives."""

    universe_id: str
    holder_workflow_id: str
    execution_id: str
    invocation: Invocation

    def document(self) -> dict[str, Any]:
        """The serde form."""
        return {
            "universe_id": self.universe_id,
            "holder_workflow_id": self.holder_workflow_id,
            "execution_id": self.execution_id,
            "invocation": self.invocation.document(),
        }


def parse_producer(value: Any, path: str = "producer") -> Producer:
    """An EmissionProducer."""
    source = f.obj(value, path)
    kind = f.kind(source, path, PRODUCER_KINDS, "producer")
    universe = f.universe(source, "universe_id", path)
    if kind == "session":
        session = f.nonempty(source, "session_id", path)
        return Producer(
            kind, universe, session_id=session, log_seq=f.unsigned(source, "log_seq", path)
        )
    return Producer(kind, universe, workflow_id=f.nonempty(source, "workflow_id", path))


def parse_resolution(value: Any, path: str) -> Resolution:
    """A PromiseResolution."""
    source = f.obj(value, path)
    kind = f.kind(source, path, RESOLUTION_KINDS, "promise resolution")
    if kind == "resolved":
        return Resolution(kind, f.text(source, "payload_ref", path, optional=True))
    if kind == "failed":
        return Resolution(kind, f.text(source, "error_ref", path, optional=True))
    return Resolution(kind)


def parse_completion_promises(value: Any, path: str) -> dict[str, str]:
    """Exactly one key, `reply` (E15): missing, other-named or extra keys are refused."""
    if value is None:
        raise ContractError(path, "a joined tool needs completion_promises with the key 'reply'")
    source = f.obj(value, path)
    keys = sorted(source)
    if keys != [REPLY_KEY]:
        raise ContractError(path, f"expected exactly the one key 'reply', got {keys}")
    return {REPLY_KEY: f.nonempty(source, REPLY_KEY, path)}


def parse_invocation(value: Any, path: str) -> Invocation:
    """A WorkflowToolInvocation."""
    s = f.obj(value, path)
    promises = parse_completion_promises(
        f.member(s, "completion_promises", path, optional=True),
        f.path_of(path, "completion_promises"),
    )
    return Invocation(
        invocation_id=f.nonempty(s, "invocation_id", path),
        tool_id=f.nonempty(s, "tool_id", path),
        semantic_type=f.text(s, "semantic_type", path),
        schema_revision=f.unsigned(s, "schema_revision", path, bits=32),
        binding_fingerprint=f.text(s, "binding_fingerprint", path),
        session_universe_id=f.universe(s, "session_universe_id", path),
        session_id=f.nonempty(s, "session_id", path),
        run_id=f.unsigned(s, "run_id", path),
        turn_id=f.unsigned(s, "turn_id", path),
        tool_batch_id=f.unsigned(s, "tool_batch_id", path),
        tool_call_id=f.text(s, "tool_call_id", path),
        arguments_ref=f.nonempty(s, "arguments_ref", path),
        completion_promises=promises,
        execution_context_ref=f.text(s, "execution_context_ref", path, optional=True),
    )


def _content(value: Any, path: str) -> dict[str, Any] | None:
    if value is None:
        return None
    source = f.obj(value, path)
    return {
        "content_ref": f.nonempty(source, "content_ref", path),
        "media_type": f.text(source, "media_type", path, optional=True),
        "provider_kind": f.text(source, "provider_kind", path, optional=True),
    }


def parse_body(value: Any, path: str = "body") -> Body:
    """An EmissionBody of one of the four kinds (E5)."""
    s = f.obj(value, path)
    kind = f.kind(s, path, BODY_KINDS, "emission body")
    if kind == "run_terminal":
        status = f.text(s, "status", path)
        if status not in RUN_STATUSES:
            raise ContractError(f.path_of(path, "status"), f"unknown run status {status!r}")
        return Body(
            kind,
            {
                "run_id": f.unsigned(s, "run_id", path),
                "status": status,
                # Opaque controller correlation state: carried, never interpreted (E6).
                "token": f.text(s, "token", path),
                "output": _content(f.member(s, "output", path, optional=True), f"{path}.output"),
                "failure_message_ref": f.text(s, "failure_message_ref", path, optional=True),
            },
        )
    if kind == "source_resolution":
        promise = f.nonempty(s, "promise_id", path)
        resolution = parse_resolution(f.member(s, "resolution", path), f"{path}.resolution")
        return Body(kind, {"promise_id": promise}, resolution=resolution)
    if kind == "tool_invocation":
        holder = f.nonempty(s, "holder_workflow_id", path)
        invocation = parse_invocation(f.member(s, "invocation", path), f"{path}.invocation")
        return Body(kind, {"holder_workflow_id": holder}, invocation=invocation)
    return Body(
        kind,
        {
            "invocation_id": f.nonempty(s, "invocation_id", path),
            "completion_key": f.nonempty(s, "completion_key", path),
            "promise_id": f.nonempty(s, "promise_id", path),
        },
    )


def parse_envelope(value: Any) -> Envelope:
    """An EmissionEnvelope, or ContractError naming the first refused member."""
    s = f.obj(value, "")
    emission_id = f.nonempty(s, "emission_id", "")
    # The body first: its kind decides which form the id must have.
    body = parse_body(f.member(s, "body", ""))
    if body.invocation is not None:
        if emission_id != body.invocation.invocation_id:
            raise ContractError(
                "emission_id", "a tool_invocation's emission id must be its invocation id (E4)"
            )
    elif not is_emission_id(emission_id):
        raise ContractError("emission_id", "invalid format: expected emission:sha256:<64 hex>")
    producer = parse_producer(f.member(s, "producer", ""))
    return Envelope(emission_id, producer, body)


def parse_start_args(value: Any) -> StartArgs:
    """A WorkflowToolStartArgs."""
    s = f.obj(value, "")
    return StartArgs(
        universe_id=f.universe(s, "universe_id", ""),
        holder_workflow_id=f.nonempty(s, "holder_workflow_id", ""),
        execution_id=f.nonempty(s, "execution_id", ""),
        invocation=parse_invocation(f.member(s, "invocation", ""), "invocation"),
    )


def parse_recovery_result(value: Any) -> dict[str, Resolution]:
    """A WorkflowToolRecoveryResult's resolutions by completion key (absent = none yet)."""
    s = f.obj(value, "")
    resolutions = f.obj(f.member(s, "resolutions", "", optional=True) or {}, "resolutions")
    return {key: parse_resolution(item, f"resolutions.{key}") for key, item in resolutions.items()}


def recovery_document(resolutions: dict[str, Resolution]) -> dict[str, Any]:
    """The serde form of a WorkflowToolRecoveryResult."""
    return {"resolutions": {key: item.document() for key, item in resolutions.items()}}


def parse_document(value: Any) -> Envelope | StartArgs:
    """An envelope, or start args when the document has no emission_id but an execution_id."""
    if isinstance(value, dict) and "emission_id" not in value and "execution_id" in value:
        return parse_start_args(value)
    return parse_envelope(value)
