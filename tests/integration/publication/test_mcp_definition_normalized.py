"""A published version stores its normalized definition and expression digests (seed 001 X5)."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg
import pytest

from runtime.canonical import canonical_digest
from runtime.errors import WorkflowError
from runtime.security.devtools import DevIdentity
from runtime.store import Database
from tests.support.binding_builders import HOST, definition_yaml
from tests.support.binding_mcp import Actors, actors_of, publish_definition_text

pytestmark = pytest.mark.requirement("001:CEL Runtime Contract")

Admin = psycopg.AsyncConnection[Any]

BARE_LEAF_TASK = (
    "  - summarize:\n"
    "      set:\n"
    '        total: "${ 1 + 2 }"\n'
    "      output:\n"
    "        as:\n"
    "          risk: .total\n"
)


@pytest.fixture
def actors(http: httpx.AsyncClient, dev_identity: DevIdentity) -> Actors:
    return actors_of(http, dev_identity)


async def _stored(admin: Admin, wf_def_id: str) -> dict[str, Any]:
    cursor = await admin.execute(
        "SELECT document, normalized_document, expression_digests FROM wf_definition_version_t"
        " WHERE host_id = %s AND wf_def_id = %s",
        (HOST, wf_def_id),
    )
    row = await cursor.fetchone()
    assert row is not None
    return dict(row)


async def test_publish_stores_the_normalized_definition_and_every_expression_digest(
    actors: Actors, admin: Admin
) -> None:
    text = definition_yaml(extra_task=BARE_LEAF_TASK)
    wf_def_id = await publish_definition_text(actors.owner, text)
    row = await _stored(admin, wf_def_id)
    task = row["normalized_document"]["do"][1]["summarize"]
    # The bare `.total` leaf is an expression in the stored normalized definition...
    assert task["output"]["as"] == {"risk": "${ .total }"}
    # ...while the submitted document keeps what the author wrote.
    assert row["document"]["do"][1]["summarize"]["output"]["as"] == {"risk": ".total"}
    assert row["expression_digests"] == [
        {
            "task": "/do/1/summarize",
            "expression": text_,
            "digest": canonical_digest({"profile": "cel-value-v1", "expression": text_}),
        }
        for text_ in (".total", "1 + 2")  # the task's output.as, then its set
    ]


async def test_the_stored_normalization_is_immutable(actors: Actors, db: Database) -> None:
    wf_def_id = await publish_definition_text(actors.owner, definition_yaml())
    with pytest.raises(WorkflowError, match="cannot be changed"):
        async with db.transaction() as conn:
            await conn.execute(
                "UPDATE wf_definition_version_t SET normalized_document = '{}'::jsonb"
                " WHERE host_id = %s AND wf_def_id = %s",
                (HOST, wf_def_id),
            )
