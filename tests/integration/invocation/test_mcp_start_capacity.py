"""workflow_start while its class is shed: a new run is refused and writes nothing; the same
key of a live run still attaches (seed 000: the attach check runs before capacity).

The verdict is decided before workflow_admit_start and only refuses a new run; these pass on
workflow_start's earlier Python road as well (it judged capacity after the claim).
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.admission.controller import CapacityEstimator
from runtime.collaborators import Services
from runtime.store import Database
from tests.support.binding_builders import definition_yaml, new_id
from tests.support.invocation import ok, refused, save_head
from tests.support.mcp import McpTestClient

pytestmark = pytest.mark.requirement("000:Admission")

WRITTEN_BY_ADMISSION = (
    "workflow_process",
    "workflow_task",
    "workflow_idempotency_t",
    "workflow_invocation_t",
    "workflow_run_spec",
    "workflow_run_credential",
    "workflow_budget",
    "workflow_action_authority_t",
)


async def _row_counts(db: Database) -> dict[str, int]:
    counts = {}
    async with db.connection() as conn:
        for table in WRITTEN_BY_ADMISSION:
            cursor = await conn.execute(f"SELECT count(*) AS n FROM {table}")
            row = await cursor.fetchone()
            assert row is not None
            counts[table] = int(row["n"])
    return counts


def _shed(monkeypatch: pytest.MonkeyPatch, estimator: CapacityEstimator) -> list[str]:
    """Every class over capacity from now on (retryAfterMs 1234); the classes judged."""
    judged: list[str] = []

    def decide(execution_class: str, *_: Any, **__: Any) -> int:
        judged.append(execution_class)
        return 1234

    monkeypatch.setattr(estimator, "decide", decide)
    return judged


async def test_a_shed_start_is_refused_writing_nothing_and_its_key_still_attaches(
    owner: McpTestClient,
    caller: McpTestClient,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    args = {"wfDefId": wf_def_id, "input": {"claimId": "C-1"}, "idempotencyKey": "live"}
    receipt = ok(await caller.call_tool("workflow_start", args))
    before = await _row_counts(services.database)

    judged = _shed(monkeypatch, services.admission.estimator)
    fresh = {**args, "idempotencyKey": "fresh"}
    body = refused(await caller.call_tool("workflow_start", fresh), "WORKFLOW_CAPACITY_EXHAUSTED")
    assert body["error"]["retryAfterMs"] == 1234
    assert judged == ["standard"]
    assert await _row_counts(services.database) == before

    # The live run's own key: the same receipt, nothing written, while the class is shed.
    assert ok(await caller.call_tool("workflow_start", args)) == receipt
    assert await _row_counts(services.database) == before
    # Another input under the live key conflicts rather than being shed.
    other = {**args, "input": {"claimId": "C-2"}}
    refused(await caller.call_tool("workflow_start", other), "WORKFLOW_IDEMPOTENCY_CONFLICT")


async def test_only_a_new_start_counts_as_admitted_for_the_estimator(
    owner: McpTestClient, caller: McpTestClient, services: Services
) -> None:
    estimator = services.admission.estimator
    wf_def_id = new_id()
    await save_head(owner, wf_def_id, definition_yaml())
    args = {"wfDefId": wf_def_id, "input": {"claimId": "C-1"}, "idempotencyKey": "k"}
    estimator.admitted_since_sample.clear()
    ok(await caller.call_tool("workflow_start", args))
    assert estimator.admitted_since_sample == {"standard": 1}
    ok(await caller.call_tool("workflow_start", args))
    assert estimator.admitted_since_sample == {"standard": 1}
