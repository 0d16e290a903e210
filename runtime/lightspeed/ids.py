"""The contract's derived identities: emission ids, workflow ids, recipe fingerprints, CAS refs.

Seed 003 fixes these by known-answer vectors (../shared/reference/lightspeed-workflow-contract-
v2.json): every hashed piece is prefixed by its byte length as a u64 big-endian, so no
concatenation of two parts can collide with another split of the same bytes (E17).
"""

from __future__ import annotations

import hashlib
import re
import uuid

from runtime.lightspeed.errors import ContractError

HASH_DOMAIN = "lightspeed.emission.v1"
EMISSION_PREFIX = "emission:sha256:"
RECIPE_PREFIX = "wtr:sha256:"
CONTENT_PREFIX = "sha256:"
REPLY_KEY = "reply"
SIGNAL = "deliver_emission"
RECOVERY_QUERY = "workflow_tool_recovery"
EXECUTION_PRODUCER_KIND = "workflow_tool.execution"
WORKFLOW_ID_SEPARATOR = "/"
U64_MAX = 2**64 - 1

_HEX64 = re.compile(r"[0-9a-f]{64}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def universe_text(value: str, field: str = "universe_id") -> str:
    """A universe id as the framing hashes it: lowercase hyphenated UUID text."""
    if not isinstance(value, str) or _UUID.fullmatch(value) is None:
        raise ContractError(field, "invalid format: expected a hyphenated UUID")
    return str(uuid.UUID(value))


def _u64(value: int, field: str) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= U64_MAX:
        raise ContractError(field, "expected an unsigned 64-bit integer")
    return value.to_bytes(8, "big")


def _frame(pieces: list[bytes]) -> bytes:
    return b"".join(len(piece).to_bytes(8, "big") + piece for piece in pieces)


def _emission_id(kind: str, parts: list[bytes]) -> str:
    framed = _frame([HASH_DOMAIN.encode(), kind.encode(), *parts])
    return EMISSION_PREFIX + hashlib.sha256(framed).hexdigest()


def run_terminal_id(universe_id: str, session_id: str, run_id: int, token: str) -> str:
    """The emission id of a run_terminal fact."""
    parts = [universe_text(universe_id).encode(), session_id.encode()]
    return _emission_id("run_terminal", [*parts, _u64(run_id, "run_id"), token.encode("utf-8")])


def source_resolution_id(
    universe_id: str, producer_workflow_id: str, holder_workflow_id: str, promise_id: str
) -> str:
    """The emission id of a source_resolution: the same on every retry of one reply (E17)."""
    parts = [universe_text(universe_id), producer_workflow_id, holder_workflow_id, promise_id]
    return _emission_id("source_resolution", [part.encode("utf-8") for part in parts])


def invocation_cancellation_id(invocation_id: str, completion_key: str) -> str:
    """The emission id of an invocation_cancellation notice."""
    parts = [invocation_id.encode("utf-8"), completion_key.encode("utf-8")]
    return _emission_id("invocation_cancellation", parts)


def tool_invocation_id(invocation_id: str) -> str:
    """A tool_invocation's emission id is its invocation id, verbatim (E4)."""
    return invocation_id


def is_emission_id(value: str) -> bool:
    """Whether value has the derived form `emission:sha256:<64 lowercase hex>`."""
    return value.startswith(EMISSION_PREFIX) and bool(
        _HEX64.fullmatch(value[len(EMISSION_PREFIX) :])
    )


def session_workflow_id(universe_id: str, session_id: str) -> str:
    """The stable workflow id of a session: `{universe}/{session}` (signal it, never a run id)."""
    return f"{universe_text(universe_id)}{WORKFLOW_ID_SEPARATOR}{session_id}"


def environment_job_workflow_id(universe_id: str, environment_id: str, job_group_id: str) -> str:
    """The stable workflow id of an environment job: `{universe}/envjob-{env}-{group}`."""
    sep = WORKFLOW_ID_SEPARATOR
    return f"{universe_text(universe_id)}{sep}envjob-{environment_id}-{job_group_id}"


def split_workflow_id(workflow_id: str) -> tuple[str, str]:
    """(universe, rest) of a universe-scoped workflow id, split on the first separator."""
    universe, sep, rest = workflow_id.partition(WORKFLOW_ID_SEPARATOR)
    if not sep or not rest:
        raise ContractError("workflow_id", "invalid format: expected {universe}/{rest}")
    return universe_text(universe, "workflow_id"), rest


def recipe_fingerprint(raw: bytes) -> str:
    """`wtr:sha256:` over a recipe's exact raw bytes (E19): no re-encoding, no canonical form."""
    return RECIPE_PREFIX + hashlib.sha256(raw).hexdigest()


def content_ref(data: bytes) -> str:
    """The CAS reference of bytes: `sha256:<hex>` (arguments_ref, payload_ref)."""
    return CONTENT_PREFIX + hashlib.sha256(data).hexdigest()


def is_content_ref(value: str) -> bool:
    """Whether value has the form `sha256:<64 lowercase hex>`."""
    return value.startswith(CONTENT_PREFIX) and bool(_HEX64.fullmatch(value[len(CONTENT_PREFIX) :]))
