"""A busy Tool's admissions go to PostgreSQL as one statement (runtime.store.batches).

While a Tool has `capacity.admission_statements_per_tool` admission statements in flight in
this process, its next calls wait; as one statement ends, the calls waiting (up to BATCH_MAX)
go together in one statement and one transaction (store.admit_invoke_batch), each in a
subtransaction of its own, so each gets the answer it would get alone. Calls of different
Tools never share a statement: one transaction then holds only one Tool's locks. The process's
Admission (runtime.admission.state) keeps one batcher per database.
"""

from __future__ import annotations

from collections.abc import Callable

from runtime.invocation import store
from runtime.store import Database
from runtime.store.batches import StatementBatcher, on_pool
from runtime.telemetry import metrics

# workflow_admission_batch_max() (migrations/functions/invocation_admission.sql): the
# statement refuses a larger batch.
BATCH_MAX = 8

ToolKey = tuple[str, str]
AdmissionBatcher = StatementBatcher[ToolKey, store.AdmitParams, store.AdmitOutcome]


def admission_batcher(db: Database, in_flight: Callable[[], int]) -> AdmissionBatcher:
    """The admission batcher of db: in_flight() statements per Tool at once, the rest batched."""
    return on_pool(
        db,
        # Looked up at each statement, as a call in place of them would be (fault injection
        # replaces them on the module).
        lambda conn, params: store.admit_invoke(conn, params),
        lambda conn, calls: store.admit_invoke_batch(conn, calls),
        batch_max=BATCH_MAX,
        in_flight=in_flight,
        sent=metrics.record_admission_statement,
    )


async def admit(batcher: AdmissionBatcher, params: store.AdmitParams) -> store.AdmitOutcome:
    """The call's admission as store.admit_invoke answers it (not exclusive), maybe batched."""
    return await batcher.run((params.host_id, params.tool_id), params)
