"""Seed 003's known-answer vectors (../shared, never copied here) and envelopes built from them.

The reference file is the upstream manifest-v2 facts; a clone without ../shared skips the tests
that read it, by name. Our own envelopes below use the same shapes with our own values, so the
parser's rules are tested everywhere.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.support.shared import has_shared, requires_shared, shared_path

VECTORS = "reference/lightspeed-workflow-contract-v2.json"
UNIVERSE = "0b6f8c8e-2a4d-4c7e-9d1a-5e3f2b1c0d9e"
INVOCATION_ID = "wti:sha256:" + "b" * 64
HOLDER = f"{UNIVERSE}/bot:v1:demo"

requires_vectors = requires_shared(VECTORS)


def vectors() -> dict[str, Any]:
    """The reference document (only under requires_vectors)."""
    document: dict[str, Any] = json.loads(shared_path(VECTORS).read_text(encoding="utf-8"))
    return document


def reference_envelopes() -> list[Any]:
    """The four upstream envelopes as parameters, or one skipped parameter without ../shared."""
    if not has_shared(VECTORS):
        return [pytest.param(None, id="shared-reference", marks=requires_vectors)]
    return [
        pytest.param(envelope, id=envelope["body"]["kind"]) for envelope in vectors()["envelopes"]
    ]


def invocation(**changes: Any) -> dict[str, Any]:
    """A WorkflowToolInvocation of our own (arguments `{}`), with changes applied."""
    document: dict[str, Any] = {
        "arguments_ref": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
        "binding_fingerprint": "binding:v1:demo",
        "completion_promises": {"reply": "promise_3"},
        "execution_context_ref": None,
        "invocation_id": INVOCATION_ID,
        "run_id": 2,
        "schema_revision": 1,
        "semantic_type": "demo.echo.v1",
        "session_id": "bot:v1:demo",
        "session_universe_id": UNIVERSE,
        "tool_batch_id": 1,
        "tool_call_id": "call_9",
        "tool_id": "demo.echo.v1",
        "turn_id": 4,
    }
    document.update(changes)
    return document


def tool_invocation_envelope(**changes: Any) -> dict[str, Any]:
    """A pushed tool_invocation envelope of our own."""
    inv = invocation(**changes)
    return {
        "emission_id": inv["invocation_id"],
        "producer": {
            "kind": "session",
            "universe_id": UNIVERSE,
            "session_id": "bot:v1:demo",
            "log_seq": 11,
        },
        "body": {"kind": "tool_invocation", "holder_workflow_id": HOLDER, "invocation": inv},
    }


def changed(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy with the member at dotted path set to value (or removed when value is ...)."""
    result = copy.deepcopy(document)
    *parents, last = path.split(".")
    target = result
    for name in parents:
        target = target[name]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return result
