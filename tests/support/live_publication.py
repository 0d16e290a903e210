"""Publication steps and checks of the qualification tests on the live service."""

from __future__ import annotations

from typing import Any

from runtime.canonical import definition_digest
from runtime.store import Database
from tests.support.binding_builders import OWNER, OWNER_POSITION, insert_version_row
from tests.support.binding_mcp import ok
from tests.support.live_stack import QualStack
from tests.support.mcp import McpTestClient
from tests.support.publication_builders import HOST, new_id, save_args


async def stored_rows(stack: QualStack, wf_def_id: str, operation_id: str) -> dict[str, int]:
    """What the database holds for a definition id and an operation id, table by table."""
    return {
        "head": await stack.count(
            "SELECT count(*) FROM wf_definition_t WHERE wf_def_id = %s", wf_def_id
        ),
        "versions": await stack.count(
            "SELECT count(*) FROM wf_definition_version_t WHERE wf_def_id = %s", wf_def_id
        ),
        "operations": await stack.count(
            "SELECT count(*) FROM workflow_publication_operation_t WHERE operation_id = %s",
            operation_id,
        ),
    }


def save_text(wf_def_id: str, revision: int, text: str, **overrides: Any) -> dict[str, Any]:
    """workflow_definition_save arguments saving text as the head at revision."""
    return save_args(wf_def_id, revision, definition=text, **overrides)


def invoke_pinned(tool_id: str, binding_digest: str, text: str) -> dict[str, Any]:
    """workflow_invoke arguments of a Gateway snapshot pinning these digests."""
    return {
        "stableToolRef": tool_id,
        "expectedBindingDigest": binding_digest,
        "expectedDefinitionDigest": definition_digest(text),
        "input": {"claimId": "C-1001"},
    }


async def publish_with_reapprove(
    owner: McpTestClient, wf_def_id: str, text: str, version: str
) -> None:
    """The owner publishes a version that sends every revision pinning it back for approval."""
    args = {
        "hostId": HOST,
        "wfDefId": wf_def_id,
        "namespace": "claims",
        "name": "summarize-claim",
        "version": version,
        "definition": text,
        "expectedDefinitionDigest": definition_digest(text),
        "bindingApproval": "reapprove",
        "owner": {"userId": OWNER, "positionId": OWNER_POSITION},
        "operationId": new_id(),
    }
    ok(await owner.call_tool("workflow_definition_publish", args))


async def store_version_outside_publication(
    database_url: str, wf_def_id: str, text: str, version: str
) -> None:
    """A version row written as the schema owner, past the definition validator (a version
    publish would refuse today, such as one with a human task)."""
    database = Database(database_url, runtime_role=None, min_size=1, max_size=1)
    await database.open()
    try:
        await insert_version_row(database, wf_def_id, text, version)
    finally:
        await database.close()
