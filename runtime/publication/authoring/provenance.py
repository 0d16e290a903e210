"""AI-authoring provenance in save and publish: document.metadata.aiAuthoring (seed 001 Phase 3).

An AI-authored definition carries the generator's evidence (model, prompt-template version,
source schema digests, request digest, definition digest) and the reviewer who applied it. Save
and publish check it strictly: the reviewer is the authenticated subject (never what the browser
says), the definition digest is the semantic digest of the text without the provenance (an
edit after review needs another review), and the draft still meets the Phase 3 rules against
the Tools it names. Save also refuses catalogVisible: true on an AI-authored definition (the
private-first rule); production exposure is the separate binding promotion with its usual gates.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final

import msgspec

from generated.models import Sha256Digest, ToolId, ToolName
from runtime.canonical import PROVENANCE_KEY, definition_digest
from runtime.engine.check.authoring_rules import authoring_problems
from runtime.errors import WorkflowError, input_invalid, policy_denied
from runtime.publication.authoring.catalog import selected_tools
from runtime.security import InvocationContext
from runtime.store import Connection

POINTER: Final = f"/document/metadata/{PROVENANCE_KEY}"


class SourceSchema(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """One selected Tool the draft was generated from."""

    tool_id: ToolId
    tool_name: ToolName
    schema_digest: Sha256Digest


class AiAuthoring(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    """document.metadata.aiAuthoring: the generator's evidence and the reviewer."""

    model: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    prompt_template_version: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    source_schemas: Annotated[list[SourceSchema], msgspec.Meta(min_length=1, max_length=16)]
    request_digest: Sha256Digest
    definition_digest: Sha256Digest
    reviewer_user_id: Annotated[str, msgspec.Meta(min_length=1, max_length=126)]

    @property
    def tool_names(self) -> frozenset[str]:
        """The names of the Tools the draft may call."""
        return frozenset(source.tool_name for source in self.source_schemas)


def _refused(message: str, rule: str, pointer: str = POINTER) -> WorkflowError:
    problem = {"pointer": pointer, "rule": rule, "message": message}
    return input_invalid(message, details={"problems": [problem]})


def provenance_of(document: Mapping[str, Any]) -> AiAuthoring | None:
    """The document's AI-authoring provenance, strictly parsed; None for a manual definition."""
    header = document.get("document")
    metadata = header.get("metadata") if isinstance(header, Mapping) else None
    if not isinstance(metadata, Mapping) or PROVENANCE_KEY not in metadata:
        return None
    try:
        return msgspec.convert(metadata[PROVENANCE_KEY], AiAuthoring)
    except msgspec.ValidationError as error:
        raise _refused(
            f"{PROVENANCE_KEY} provenance is invalid: {error}", "ai-authoring-provenance"
        ) from None


def check_provenance(document: dict[str, Any], provenance: AiAuthoring) -> None:
    """The digest the reviewer approved is this definition's, and the Phase 3 rules still hold."""
    digest = definition_digest(document)
    if provenance.definition_digest != digest:
        raise WorkflowError(
            "WORKFLOW_DEFINITION_MISMATCH",
            "the definition changed after its AI-authored draft was reviewed: its semantic "
            "digest differs from aiAuthoring.definitionDigest; review the edited draft again",
            details={"definitionDigest": digest, "pointer": f"{POINTER}/definitionDigest"},
        )
    problems = authoring_problems(document, provenance.tool_names)
    if problems:
        raise input_invalid(
            f"the AI-authored definition breaks the authoring rules: {problems[0].message}",
            details={"problems": [problem.as_json() for problem in problems]},
        )


def check_reviewer(ctx: InvocationContext, provenance: AiAuthoring) -> None:
    """reviewerUserId is the authenticated subject, never an identity the browser asserts."""
    if provenance.reviewer_user_id != ctx.user_id:
        raise policy_denied(
            "aiAuthoring.reviewerUserId must be the authenticated reviewer's own user id"
        )


def check_private_first(provenance: AiAuthoring | None, catalog_visible: bool) -> None:
    """An AI-authored definition is saved private: catalogVisible: true is refused."""
    if provenance is not None and catalog_visible:
        raise _refused(
            "an AI-authored definition is saved private (catalogVisible: false); production "
            "exposure is the separate Tool binding promotion under the normal gates",
            "ai-authored-private-first",
            "/catalogVisible",
        )


async def check_source_tools(
    conn: Connection, ctx: InvocationContext, provenance: AiAuthoring
) -> None:
    """Each source Tool is still one the reviewer may call, with the schemas the model saw.

    Fails closed: a Tool gone, out of the reviewer's reach or changed since generation refuses
    the save, so the draft is regenerated against what the catalog holds now.
    """
    current = {
        tool.tool_id: tool
        for tool in await selected_tools(
            conn, ctx, [source.tool_id for source in provenance.source_schemas]
        )
    }
    for index, source in enumerate(provenance.source_schemas):
        tool = current[source.tool_id]
        if (tool.tool_name, tool.schema_digest) != (source.tool_name, source.schema_digest):
            raise WorkflowError(
                "WORKFLOW_DEFINITION_MISMATCH",
                f"source Tool {source.tool_id} changed since the draft was generated "
                f"(now {tool.tool_name} with schemaDigest {tool.schema_digest}); generate the "
                "draft again",
                details={"pointer": f"{POINTER}/sourceSchemas/{index}"},
            )
