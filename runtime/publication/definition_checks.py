"""What publication records of a definition version beside its text: the normalized document
and every expression with its digest (seed 001 "CEL Runtime Contract", dsl-profile §1)."""

from __future__ import annotations

from typing import Any

from runtime.canonical import canonical_digest
from runtime.engine import WorkflowDefinition
from runtime.engine.checks import expression_sites
from runtime.engine.model import thaw

# Names the expression language and its value mapping: a digest is only comparable within one.
EXPRESSION_PROFILE = "cel-value-v1"


def normalized_document(definition: WorkflowDefinition) -> dict[str, Any]:
    """The document as the engine normalized it (bare `.x` transform leaves rewritten)."""
    document: dict[str, Any] = thaw(definition.normalized)
    return document


def expression_digest(text: str) -> str:
    """sha256 of the canonical {profile, expression}: the identity of a compiled program."""
    return canonical_digest({"profile": EXPRESSION_PROFILE, "expression": text})


def expression_digests(definition: WorkflowDefinition) -> list[dict[str, str]]:
    """Every expression in walk order: the task pointer, the normalized text and its digest."""
    return [
        {"task": site.task, "expression": site.text, "digest": expression_digest(site.text)}
        for site in expression_sites(definition)
    ]
