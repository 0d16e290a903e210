-- The step ledger: one row per (run, step) once an external effect may have been dispatched.
-- It moves possible -> confirmed; a reclaimed task reads it before dispatching again.

CREATE TABLE workflow_step (
    host_id uuid NOT NULL,
    process_id uuid NOT NULL,
    step_no integer NOT NULL,
    task_id uuid NOT NULL,
    effect_state text NOT NULL,
    -- The fencing token of the lease that last wrote the row.
    fencing_token bigint NOT NULL,
    output jsonb,
    possible_ts timestamptz NOT NULL DEFAULT now(),
    confirmed_ts timestamptz,
    CONSTRAINT workflow_step_pk PRIMARY KEY (host_id, process_id, step_no),
    CONSTRAINT workflow_step_task_fk FOREIGN KEY (host_id, task_id)
        REFERENCES workflow_task (host_id, task_id) ON DELETE CASCADE,
    CONSTRAINT workflow_step_effect_check CHECK (effect_state IN ('possible', 'confirmed')),
    CONSTRAINT workflow_step_confirmed_check
        CHECK ((effect_state = 'confirmed') = (confirmed_ts IS NOT NULL))
);

REVOKE DELETE, TRUNCATE ON workflow_step FROM workflow_runtime;
