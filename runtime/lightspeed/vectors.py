"""Reproduce a known-answer vectors document (manifest contractVersion 2) and compare each value.

The document is the upstream workflow.json's facts (inputs, expected ids, reference envelopes);
we keep it outside the repository (../shared/reference) and recompute every value from inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.lightspeed import ids
from runtime.lightspeed.envelope import (
    parse_envelope,
    parse_recovery_result,
    parse_start_args,
    recovery_document,
)
from runtime.lightspeed.errors import ContractError


@dataclass(frozen=True)
class Check:
    """One reproduced value: its path in the document, and what we computed if it differs."""

    name: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        """`ok NAME` or `MISMATCH NAME: detail`."""
        return f"ok {self.name}" if self.ok else f"MISMATCH {self.name}: {self.detail}"


def _at(document: Any, path: str) -> Any:
    value = document
    for name in path.split("."):
        if not isinstance(value, dict) or name not in value:
            raise ContractError(path, "missing in the vectors document")
        value = value[name]
    return value


def _equal(name: str, expected: Any, actual: Any) -> Check:
    if expected == actual:
        return Check(name, True)
    return Check(name, False, f"expected {expected!r}, computed {actual!r}")


def _derivations(i: Callable[[str], Any]) -> dict[str, Any]:
    universe = i("universeId")
    return {
        "expected.emissionIds.runTerminal": ids.run_terminal_id(
            universe, i("sessionId"), i("runId"), i("token")
        ),
        "expected.emissionIds.sourceResolution": ids.source_resolution_id(
            universe, i("producerWorkflowId"), i("holderWorkflowId"), i("promiseId")
        ),
        "expected.emissionIds.invocationCancellation": ids.invocation_cancellation_id(
            i("invocationId"), i("completionKey")
        ),
        "expected.emissionIds.toolInvocation": ids.tool_invocation_id(i("invocationId")),
        "expected.recipeFingerprint": ids.recipe_fingerprint(i("recipeJson").encode("utf-8")),
        "expected.workflowIds.session": ids.session_workflow_id(universe, i("sessionId")),
        "expected.workflowIds.environmentJob": ids.environment_job_workflow_id(
            universe, i("environmentId"), i("jobGroupId")
        ),
    }


CONSTANTS = {
    "framing.hashDomain": ids.HASH_DOMAIN,
    "framing.replyCompletionKey": ids.REPLY_KEY,
    "framing.executionProducerKind": ids.EXECUTION_PRODUCER_KIND,
    "framing.signal": ids.SIGNAL,
    "framing.recoveryQuery": ids.RECOVERY_QUERY,
}


def _envelope_id(document: Any, envelope: Any) -> str:
    """The id an envelope must carry, derived from its own members and the vector inputs."""
    body, producer = envelope.body, envelope.producer
    if body.kind == "run_terminal":
        fields = body.fields
        return ids.run_terminal_id(
            producer.universe_id, producer.session_id, fields["run_id"], fields["token"]
        )
    if body.kind == "source_resolution":
        holder = _at(document, "inputs.holderWorkflowId")
        return ids.source_resolution_id(
            producer.universe_id, producer.workflow_id, holder, body.fields["promise_id"]
        )
    if body.kind == "tool_invocation":
        return ids.tool_invocation_id(body.invocation.invocation_id)
    return ids.invocation_cancellation_id(
        body.fields["invocation_id"], body.fields["completion_key"]
    )


def _envelope_checks(document: Any) -> list[Check]:
    checks: list[Check] = []
    for index, raw in enumerate(_at(document, "envelopes")):
        name = f"envelopes[{index}]"
        try:
            envelope = parse_envelope(raw)
        except ContractError as error:
            checks.append(Check(name, False, f"refused: {error}"))
            continue
        checks.append(_equal(f"{name}.roundTrip", raw, envelope.document()))
        checks.append(
            _equal(f"{name}.emission_id", raw["emission_id"], _envelope_id(document, envelope))
        )
    return checks


def _document_checks(document: Any) -> list[Check]:
    checks: list[Check] = []
    raw_start = _at(document, "startArgs")
    try:
        checks.append(
            _equal("startArgs.roundTrip", raw_start, parse_start_args(raw_start).document())
        )
    except ContractError as error:
        checks.append(Check("startArgs", False, f"refused: {error}"))
    raw_recovery = _at(document, "expected.recoveryResult")
    try:
        parsed = recovery_document(parse_recovery_result(raw_recovery))
        checks.append(_equal("expected.recoveryResult.roundTrip", raw_recovery, parsed))
    except ContractError as error:
        checks.append(Check("expected.recoveryResult", False, f"refused: {error}"))
    return checks


def check_vectors(document: Any) -> list[Check]:
    """Every value of the vectors document recomputed and compared, in a fixed order."""
    checks = [_equal(name, _at(document, name), value) for name, value in CONSTANTS.items()]

    def inputs(name: str) -> Any:
        return _at(document, f"inputs.{name}")

    derived = _derivations(inputs)
    checks += [_equal(name, _at(document, name), value) for name, value in derived.items()]
    split = ids.split_workflow_id(_at(document, "expected.workflowIds.session"))
    checks.append(
        _equal(
            "expected.workflowIds.split",
            _at(document, "expected.workflowIds.split"),
            {"universeId": split[0], "sessionId": split[1]},
        )
    )
    return checks + _envelope_checks(document) + _document_checks(document)
