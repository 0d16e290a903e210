-- The invocation budget ledger: one row of remaining counters per run, shared by every task,
-- retry and branch, and the reservations that debit it so reconciliation is idempotent.

CREATE TABLE workflow_budget (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    remaining_attempts integer NOT NULL,
    remaining_nested_calls integer NOT NULL,
    remaining_request_bytes bigint NOT NULL,
    remaining_intermediate_bytes bigint NOT NULL,
    remaining_result_bytes bigint NOT NULL,
    remaining_cost_units bigint NOT NULL,
    updated_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_budget_pk PRIMARY KEY (host_id, process_id),
    CONSTRAINT workflow_budget_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE,
    -- The conditional debit never lets a counter go negative; this is the backstop.
    CONSTRAINT workflow_budget_nonnegative_check CHECK (
        remaining_attempts >= 0 AND remaining_nested_calls >= 0
        AND remaining_request_bytes >= 0 AND remaining_intermediate_bytes >= 0
        AND remaining_result_bytes >= 0 AND remaining_cost_units >= 0
    )
);

CREATE TABLE workflow_budget_reservation (
    host_id uuid NOT NULL,
    reservation_id uuid NOT NULL DEFAULT gen_random_uuid(),
    process_id uuid NOT NULL,
    task_id uuid NOT NULL,
    -- Only the lease that reserved may reconcile: a reclaimed task cannot release it twice.
    fencing_token bigint NOT NULL,
    state text NOT NULL DEFAULT 'reserved',
    attempts integer NOT NULL,
    nested_calls integer NOT NULL,
    request_bytes bigint NOT NULL,
    intermediate_bytes bigint NOT NULL,
    result_bytes bigint NOT NULL,
    cost_units bigint NOT NULL,
    actual jsonb,
    created_ts timestamptz NOT NULL DEFAULT now(),
    reconciled_ts timestamptz,
    CONSTRAINT workflow_budget_reservation_pk PRIMARY KEY (host_id, reservation_id),
    CONSTRAINT workflow_budget_reservation_budget_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_budget (host_id, process_id) ON DELETE CASCADE,
    CONSTRAINT workflow_budget_reservation_state_check
        CHECK (state IN ('reserved', 'reconciled')),
    CONSTRAINT workflow_budget_reservation_reconciled_check
        CHECK ((state = 'reconciled') = (reconciled_ts IS NOT NULL)),
    CONSTRAINT workflow_budget_reservation_amounts_check CHECK (
        attempts >= 0 AND nested_calls >= 0 AND request_bytes >= 0
        AND intermediate_bytes >= 0 AND result_bytes >= 0 AND cost_units >= 0
    )
);

CREATE INDEX workflow_budget_reservation_task_idx
    ON workflow_budget_reservation (host_id, task_id);

REVOKE DELETE, TRUNCATE ON workflow_budget_reservation FROM workflow_runtime;
