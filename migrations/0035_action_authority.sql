-- The action authority of a run (seed 000 "Action authority without a grant"): the grant the
-- permit ledger links nested calls to. A workflow_invoke run has no LONG registration, so its
-- row uses the run id as grant_id, the run's deadline and an action limit from the revision's
-- runtimeBounds. credential_kind says where the run's token comes from: invoke (the sealed
-- workflow_run_credential), long (the LONG producer) or broker (rows without a LONG
-- credential). The column has no default: every writer states it. Written once, in the
-- admission transaction; it goes with its run.

CREATE TABLE workflow_action_authority_t (
    host_id uuid NOT NULL,
    grant_id varchar(126) NOT NULL,
    process_id uuid NOT NULL,
    user_id varchar(126) NOT NULL,
    deadline_ts timestamptz NOT NULL,
    action_limit integer NOT NULL,
    credential_kind text NOT NULL,
    created_ts timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflow_action_authority_pk PRIMARY KEY (host_id, grant_id),
    CONSTRAINT workflow_action_authority_process_fk FOREIGN KEY (host_id, process_id)
        REFERENCES workflow_process (host_id, process_id) ON DELETE CASCADE,
    CONSTRAINT workflow_action_authority_limit_check CHECK (action_limit >= 0),
    CONSTRAINT workflow_action_authority_kind_check
        CHECK (credential_kind IN ('invoke', 'long', 'broker'))
);

CREATE INDEX workflow_action_authority_process_idx
    ON workflow_action_authority_t (host_id, process_id);

REVOKE UPDATE, DELETE, TRUNCATE ON workflow_action_authority_t FROM workflow_runtime;
