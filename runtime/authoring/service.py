"""workflow_definition_draft (seed 001 Phase 3 generateWfDefinitionDraft): a draft-only query.

It never creates, updates or publishes anything. In order: the host assertion; the service is
configured; the operation cap; no credential in the intent or the existing definition; the
selected Tools, authorization-filtered (runtime.publication.authoring.catalog); the bounded
context; one model call; the strict answer; the deterministic validator; the fixtures, run; and
the provenance a reviewer records when applying the draft.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml
from msgspec import UnsetType

from generated.models import (
    AuthoringContextReport,
    AuthoringContextReportStrippedFieldsItem,
    AuthoringProvenance,
    AuthoringSourceSchema,
    WorkflowDefinitionDraftInput,
    WorkflowDefinitionDraftOutput,
    WorkflowDefinitionDraftOutputDependenciesItem,
)
from runtime.authoring.answer import Answer, categorized, contract_fixture, parse_answer
from runtime.authoring.fixtures import run_fixtures
from runtime.authoring.model_client import complete
from runtime.authoring.prompt import (
    PROMPT_TEMPLATE_VERSION,
    GenerationRequest,
    generation_request,
    user_message,
)
from runtime.authoring.settings import AuthoringSettings
from runtime.authoring.validation import credential_problems, draft_findings
from runtime.canonical import (
    CanonicalError,
    definition_digest,
    load_definition_yaml,
    without_provenance,
)
from runtime.engine import mcp_calls, parse_definition
from runtime.engine.parse.credentials import written_credential_problems
from runtime.engine.parse.definition_errors import Problem
from runtime.errors import WorkflowError, input_invalid
from runtime.publication.authoring.catalog import CatalogTool, selected_tools
from runtime.publication.authoring.credential_text import credential_kinds
from runtime.publication.check_threads import off_loop
from runtime.publication.definition_checks import load_definition
from runtime.security import InvocationContext, check_host_assertion
from runtime.store import Database


def _not_configured() -> WorkflowError:
    return WorkflowError(
        "WORKFLOW_AUTHORING_UNAVAILABLE",
        "AI-assisted authoring is not configured on this service: the operator sets "
        "WORKFLOW_AUTHORING_LLM_URL and WORKFLOW_AUTHORING_LLM_MODEL",
    )


def _refused_input(problems: Sequence[Problem], what: str) -> WorkflowError:
    return input_invalid(
        f"{what}: {problems[0].message}",
        details={"problems": [problem.as_json() for problem in problems]},
    )


def _check_intent(intent: str) -> None:
    kinds = credential_kinds(intent)
    if kinds:
        problem = Problem(
            "/intent",
            "credential-in-intent",
            f"the intent carries what reads as a credential ({', '.join(kinds)}); a credential "
            "never goes to the authoring model: remove it",
        )
        raise _refused_input([problem], "the intent is refused")


def _existing_document(text: str | UnsetType) -> dict[str, Any] | None:
    """The existing definition without its provenance, refused when it carries a credential."""
    if isinstance(text, UnsetType):
        return None
    document = load_definition(text)
    problems = [
        Problem(f"/existingDefinition{p.pointer}", p.rule, p.message)
        for error in written_credential_problems(document)
        for p in error.problems
    ]
    problems += credential_problems(document, "/existingDefinition")
    if problems:
        raise _refused_input(problems, "the existing definition is refused")
    return without_provenance(document)


def _check_operations(request: WorkflowDefinitionDraftInput, settings: AuthoringSettings) -> None:
    count = len(set(request.tool_ids))
    if count > settings.max_operations:
        raise input_invalid(
            f"{count} Tools are selected; at most {settings.max_operations} enter one draft "
            "(authoring.max_operations): select fewer",
            details={"operationCount": count, "operationLimit": settings.max_operations},
        )


def _check_context(size: int, settings: AuthoringSettings) -> None:
    if size > settings.max_context_bytes:
        raise input_invalid(
            f"the generation context is {size} bytes, over the limit of "
            f"{settings.max_context_bytes} (authoring.max_context_bytes): select fewer Tools "
            "or shorten the intent",
            details={"contextBytes": size, "contextByteLimit": settings.max_context_bytes},
        )


def definition_text(document: dict[str, Any]) -> str:
    """The draft as YAML text that loads back to exactly the document (JSON text otherwise)."""
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
    try:
        if load_definition_yaml(text) == document:
            return text
    except CanonicalError:
        pass
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def _rejected(problems: Sequence[Problem]) -> WorkflowError:
    return WorkflowError(
        "WORKFLOW_AUTHORING_DRAFT_REJECTED",
        f"the validator refused the model's draft: {problems[0].message}"
        + (f" (and {len(problems) - 1} more findings)" if len(problems) > 1 else ""),
        details={"problems": [problem.as_json() for problem in problems]},
    )


def _context_report(
    tools: Sequence[CatalogTool], size: int, settings: AuthoringSettings
) -> AuthoringContextReport:
    stripped = [
        AuthoringContextReportStrippedFieldsItem(tool_id=tool.tool_id, pointer=pointer)
        for tool in tools
        for pointer in tool.stripped
        if len(pointer) <= 1024  # the contract's bound; deeper ones are still withheld
    ]
    return AuthoringContextReport(
        operation_count=len(tools),
        operation_limit=settings.max_operations,
        context_bytes=size,
        context_byte_limit=settings.max_context_bytes,
        stripped_fields=stripped[:256],
    )


async def _accepted(
    answer: Answer, tools: Sequence[CatalogTool]
) -> tuple[dict[str, Any], list[Any]]:
    document = answer.definition
    names = frozenset(tool.tool_name for tool in tools)
    problems, warnings = await off_loop(draft_findings, document, names)
    if problems:
        raise _rejected(problems)
    return document, warnings


def _provenance(
    settings: AuthoringSettings, tools: Sequence[CatalogTool], request_digest: str, digest: str
) -> AuthoringProvenance:
    return AuthoringProvenance(
        model=str(settings.llm_model)[:256],
        prompt_template_version=PROMPT_TEMPLATE_VERSION,
        source_schemas=[
            AuthoringSourceSchema(
                tool_id=tool.tool_id, tool_name=tool.tool_name, schema_digest=tool.schema_digest
            )
            for tool in tools
        ],
        request_digest=request_digest,
        definition_digest=digest,
    )


async def _generated(
    settings: AuthoringSettings, tools: Sequence[CatalogTool], generation: GenerationRequest
) -> tuple[Answer, dict[str, Any], list[Any]]:
    """The model's answer, strictly parsed and passed by the validator, with its warnings."""
    content = await complete(settings, generation.body)
    answer = await off_loop(parse_answer, content)  # up to max_answer_bytes of JSON
    document, warnings = await _accepted(answer, tools)
    return answer, document, warnings


async def draft_definition(
    db: Database,
    settings: AuthoringSettings,
    ctx: InvocationContext,
    request: WorkflowDefinitionDraftInput,
) -> WorkflowDefinitionDraftOutput:
    """Generate, validate and test a draft from the selected Tools; store nothing."""
    check_host_assertion(ctx, request.host_id)
    if not settings.configured:
        raise _not_configured()
    _check_operations(request, settings)
    _check_intent(request.intent)
    existing = await off_loop(_existing_document, request.existing_definition)
    async with db.connection() as conn:
        tools = await selected_tools(conn, ctx, request.tool_ids)
    message = user_message(request.intent, tools, existing)
    generation = generation_request(str(settings.llm_model), message)
    _check_context(generation.context_bytes, settings)
    answer, document, warnings = await _generated(settings, tools, generation)
    digest = definition_digest(document)
    fixtures = [contract_fixture(category, fixture) for category, fixture in categorized(answer)]
    parsed = await off_loop(parse_definition, document)
    schemas = {tool.tool_name: tool.metadata.get("outputSchema", {}) for tool in tools}
    return WorkflowDefinitionDraftOutput(
        definition=await off_loop(definition_text, document),
        definition_digest=digest,
        assumptions=answer.assumptions,
        policy_findings=answer.policy_findings,
        fixtures=fixtures,
        fixture_results=await run_fixtures(parsed, fixtures, schemas),
        warnings=warnings,
        context=_context_report(tools, generation.context_bytes, settings),
        dependencies=[
            WorkflowDefinitionDraftOutputDependenciesItem(pointer=call.pointer, tool=call.tool)
            for call in mcp_calls(parsed)
        ][:256],
        provenance=_provenance(settings, tools, generation.request_digest, digest),
    )
