"""What publication computes from a definition before storing it: all pure CPU work.

Loading the YAML, the engine's validation and data-flow checks, the digests, and what a version
records beside its text: the normalized document and every expression with its digest (seed 001
"CEL Runtime Contract", dsl-profile §1). Services run these off the serving loop
(``check_threads.off_loop``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from generated.models import PublicationWarning
from runtime.canonical import (
    CanonicalError,
    canonical_digest,
    definition_digest,
    load_definition_yaml,
    schema_digest,
)
from runtime.engine import DefinitionError, ExpressionError, WorkflowDefinition, parse_definition
from runtime.engine.check import definition_warnings
from runtime.engine.check.service_identity import service_identity_problems
from runtime.engine.model import thaw
from runtime.engine.parse import expression_sites
from runtime.engine.parse.credentials import written_credential_problems
from runtime.errors import input_invalid
from runtime.publication.store.definition_rows import ExpressionDigest

# Names the expression language and its value mapping: a digest is only comparable within one.
EXPRESSION_PROFILE = "cel-value-v1"


def normalized_document(definition: WorkflowDefinition) -> dict[str, Any]:
    """The document as the engine normalized it (bare `.x` transform leaves rewritten)."""
    document: dict[str, Any] = thaw(definition.normalized)
    return document


def expression_digest(text: str) -> str:
    """sha256 of the canonical {profile, expression}: the identity of a compiled program."""
    return canonical_digest({"profile": EXPRESSION_PROFILE, "expression": text})


def expression_digests(definition: WorkflowDefinition) -> list[ExpressionDigest]:
    """Every expression in walk order: the task pointer, the normalized text and its digest."""
    return [
        ExpressionDigest(site.task, site.text, expression_digest(site.text))
        for site in expression_sites(definition)
    ]


def load_definition(text: str) -> dict[str, Any]:
    """The definition text as a YAML document; a typed refusal when it does not load."""
    try:
        return load_definition_yaml(text)
    except CanonicalError as error:
        raise input_invalid(
            f"definition is not accepted: {error.message}",
            details={"discriminator": error.discriminator},
        ) from error


def refuse_written_credentials(document: Mapping[str, Any]) -> None:
    """Refuse a draft that writes a credential: a call's credential header (issue 24 item 3)
    or a literal in an authentication policy's secret slot (issue 40).

    A saved head is not checked against the profile (drafts may be incomplete), but a literal
    credential must not be stored even there: it would live in the head and its digests.
    """
    problems = written_credential_problems(document)
    if problems:
        error = DefinitionError.collected(problems)
        raise input_invalid(f"definition is invalid: {error.message}", details=error.details())


def validate_definition(document: dict[str, Any]) -> WorkflowDefinition:
    """Run the engine's definition model validation (runtime definition and CEL checks).

    The document is user input, so any exception the parser raises means "invalid definition":
    a parser gap must refuse the definition, never surface as a server fault.
    """
    try:
        return parse_definition(document)
    except DefinitionError as error:
        raise input_invalid(
            f"definition is invalid: {error.message}", details=error.details()
        ) from error
    except ExpressionError as error:
        details = {"reason": error.reason}
        raise input_invalid(f"definition is invalid: {error.message}", details=details) from error
    except Exception as error:  # any parser failure on user input is a refusal, never a 500
        raise input_invalid("definition is invalid: it does not match the DSL profile") from error


def refuse_unapproved_service_identity(definition: WorkflowDefinition) -> None:
    """Refuse a definition with a call that authenticates with a host secret (a service
    identity) and carries no approval evidence (seed 001, Authorization And Data Protection)."""
    problems = service_identity_problems(definition)
    if problems:
        error = DefinitionError.collected(problems)
        raise input_invalid(f"definition is invalid: {error.message}", details=error.details())


def check_document_version(document: Mapping[str, Any], version: str) -> None:
    """Refuse a version whose definition text declares another document.version."""
    header = document.get("document")
    written = header.get("version") if isinstance(header, Mapping) else None
    if isinstance(written, str) and written != version:
        raise input_invalid(
            f"document.version {written!r} in the definition differs from the version argument "
            f"{version!r}; publish it as {written!r} or change document.version to {version!r}",
            details={"documentVersion": written, "version": version},
        )


@dataclass(frozen=True, slots=True)
class CheckedDefinition:
    """What publication computes from a document before storing it (all pure CPU work)."""

    warnings: list[PublicationWarning]
    schema_digest: str
    normalized_document: dict[str, Any]
    expression_digests: list[ExpressionDigest]
    # use.secrets: the host must hold each one when the version is published.
    secrets: tuple[str, ...] = ()


def loaded_with_digest(text: str) -> tuple[dict[str, Any], str]:
    """The definition text loaded as a document, and its definition digest."""
    document = load_definition(text)
    return document, definition_digest(document)


def checked_for_publication(document: dict[str, Any]) -> CheckedDefinition:
    """Validate a loaded document and compute what its version stores beside the text."""
    definition = validate_definition(document)
    refuse_unapproved_service_identity(definition)
    found = definition_warnings(definition, document)  # refuses the data bugs it proves
    return CheckedDefinition(
        warnings=[PublicationWarning(**warning) for warning in found],
        schema_digest=schema_digest(document),
        normalized_document=normalized_document(definition),
        expression_digests=expression_digests(definition),
        secrets=definition.secrets,
    )
