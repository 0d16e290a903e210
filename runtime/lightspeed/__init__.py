"""Seed 003, the Lightspeed workflow contract, pure: envelopes, derived ids, holder rule, vectors.

No database and no transport here: the receiver bridge and the CLI (workflow_mcp.lightspeed)
build on it.
"""

from __future__ import annotations

from runtime.lightspeed.envelope import (
    BODY_KINDS,
    Body,
    Envelope,
    Invocation,
    Producer,
    Resolution,
    StartArgs,
    parse_document,
    parse_envelope,
    parse_recovery_result,
    parse_start_args,
    recovery_document,
)
from runtime.lightspeed.errors import ContractError
from runtime.lightspeed.holder import PromiseSource, Verdict, admit_source_resolution
from runtime.lightspeed.ids import (
    EXECUTION_PRODUCER_KIND,
    HASH_DOMAIN,
    REPLY_KEY,
    content_ref,
    environment_job_workflow_id,
    invocation_cancellation_id,
    is_content_ref,
    is_emission_id,
    recipe_fingerprint,
    run_terminal_id,
    session_workflow_id,
    source_resolution_id,
    split_workflow_id,
    tool_invocation_id,
)
from runtime.lightspeed.recipe import Recipe, parse_recipe
from runtime.lightspeed.vectors import Check, check_vectors

__all__ = [
    "BODY_KINDS",
    "EXECUTION_PRODUCER_KIND",
    "HASH_DOMAIN",
    "REPLY_KEY",
    "Body",
    "Check",
    "ContractError",
    "Envelope",
    "Invocation",
    "Producer",
    "PromiseSource",
    "Recipe",
    "Resolution",
    "StartArgs",
    "Verdict",
    "admit_source_resolution",
    "check_vectors",
    "content_ref",
    "environment_job_workflow_id",
    "invocation_cancellation_id",
    "is_content_ref",
    "is_emission_id",
    "parse_document",
    "parse_envelope",
    "parse_recipe",
    "parse_recovery_result",
    "parse_start_args",
    "recipe_fingerprint",
    "recovery_document",
    "run_terminal_id",
    "session_workflow_id",
    "source_resolution_id",
    "split_workflow_id",
    "tool_invocation_id",
]
