"""The active binding revision of a Tool as admission uses it, read once per revision.

A revision is immutable (seed 000 "Binding revisions"), so everything admission derives from it
(its budget, limits, compiled input schemas) is made once and kept by revision id. Only the
Tool's head may move; admission's one statement (store.admit_invoke) checks, under the head's
share lock, that the head still names the revision the call was checked against, and answers
'stale' when it does not, so a cached entry can never admit against a superseded, revoked or
retired revision.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from generated.models import AdmissionLimits, CallerPolicy
from runtime.canonical import input_schema_of
from runtime.errors import WorkflowError, policy_denied
from runtime.execution import SpecLimits
from runtime.invocation import rules, store
from runtime.scheduler import BudgetAmounts
from runtime.scheduler.models import CancellationPolicy, ExecutionClass
from runtime.store import Database, PerDatabase

# Tools per process whose revision is kept; the least recently admitted goes first.
CACHE_SIZE = 1024


@dataclass(frozen=True)
class ActiveRevision:
    """A Tool's active revision with what admission derives from it."""

    binding_id: str
    tool_id: str
    wf_def_id: str
    workflow_version: str
    definition_digest: str
    binding_digest: str
    sync_wait_ms: int
    total_deadline_ms: int
    execution_class: ExecutionClass
    cancellation_policy: CancellationPolicy
    idempotency_kind: str
    result_replay_ms: int
    admission_limits: AdmissionLimits
    caller_policy: CallerPolicy
    has_write_tasks: bool
    maximum_request_bytes: int
    budget: BudgetAmounts
    run_limits: SpecLimits
    action_limit: int
    # The Tool's input schema, then the pinned definition's.
    input_checks: tuple[rules.SchemaCheck, ...]


def _unknown_tool() -> WorkflowError:
    # The lookup is host-scoped: a Tool of another host reads exactly like an unknown one.
    return WorkflowError(
        "WORKFLOW_NOT_FOUND", "no workflow-backed Tool with this stableToolRef on the caller's host"
    )


def definition_retired() -> WorkflowError:
    """The refusal of a call whose pinned definition version is retired."""
    return WorkflowError(
        "WORKFLOW_DEFINITION_RETIRED", "the Tool's pinned definition version is retired"
    )


def _revision(row: store.RevisionRow) -> ActiveRevision:
    bounds = row.runtime_bounds
    return ActiveRevision(
        binding_id=row.binding_id,
        tool_id=row.tool_id,
        wf_def_id=row.wf_def_id,
        workflow_version=row.workflow_version,
        definition_digest=row.definition_digest,
        binding_digest=row.binding_digest,
        sync_wait_ms=row.sync_wait_ms,
        total_deadline_ms=row.total_deadline_ms,
        execution_class=row.execution_class,
        cancellation_policy=row.cancellation_policy,
        idempotency_kind=row.idempotency_policy.kind,
        result_replay_ms=row.idempotency_policy.result_replay_ms,
        admission_limits=row.admission_limits,
        caller_policy=row.caller_policy,
        has_write_tasks=row.has_write_tasks,
        maximum_request_bytes=bounds.maximum_request_bytes,
        budget=rules.budget_from(bounds),
        run_limits=rules.run_limits_from(bounds),
        action_limit=rules.action_limit_from(bounds),
        input_checks=(
            rules.schema_check(row.input_schema, "Tool"),
            rules.schema_check(input_schema_of(row.document), "workflow"),
        ),
    )


class RevisionCache:
    """Per database: the last active revision seen of each Tool, bounded."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str], ActiveRevision] = OrderedDict()

    def get(self, host_id: str, tool_id: str) -> ActiveRevision | None:
        """The cached revision of a Tool (most recently used first to stay)."""
        key = (host_id, tool_id)
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, host_id: str, revision: ActiveRevision) -> None:
        """Remember a Tool's revision."""
        key = (host_id, revision.tool_id)
        self._entries[key] = revision
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def forget(self, host_id: str, tool_id: str) -> None:
        """Drop a Tool whose head moved."""
        self._entries.pop((host_id, tool_id), None)


# The revision cache of each database (caches never mix databases).
cache_of: PerDatabase[RevisionCache] = PerDatabase(lambda db: RevisionCache())


async def read_active_revision(db: Database, host_id: str, tool_id: str) -> ActiveRevision:
    """The Tool's active revision as stored now (no lock); a typed refusal when none serves."""
    async with db.connection() as conn:
        has_head, row = await store.select_active_revision(conn, host_id, tool_id)
        if row is not None:
            if row.version_status != "active":
                raise definition_retired()
            revision = _revision(row)
            cache_of(db).put(host_id, revision)
            return revision
        closed = await store.select_last_closed_status(conn, host_id, tool_id)
    cache_of(db).forget(host_id, tool_id)
    if not has_head and closed is None:
        raise _unknown_tool()
    if closed == "revoked":
        raise policy_denied("binding revoked by workflow owner")
    raise policy_denied("the Tool has no active owner-approved binding revision")
